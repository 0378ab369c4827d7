// An OpenAI transcription upload -> the chat-completions body it stands for, as llama-server's
// convert_transcriptions_to_chatcmpl converts it: a user turn of an instruction followed by the
// clip ("Transcribe audio to text", or the upload's prompt, with " (language: xx)" when a language
// is given), after a system prompt when the template's ASR preset has one (LFM2's: "Perform ASR.");
// max_tokens and temperature pass through.

/** The upload's fields that shape its chat, read and checked from the form by the handler. */
export interface TranscriptionFields {
  audio: Uint8Array;
  /** The upload's prompt; '' for the preset's instruction. */
  prompt: string;
  /** '' for none. */
  language: string;
  maxTokens?: number;
  temperature?: number;
}

/** llama.cpp's ASR prompt (common_chat_get_asr_prompt): LFM2's templates are told "Perform ASR." */
function asrPreset(templateSource: string): { system: string; user: string } {
  const lfm2 = templateSource.includes('<|tool_list_start|>') && templateSource.includes('<|tool_list_end|>');
  return lfm2 ? { system: 'Perform ASR.', user: '' } : { system: '', user: 'Transcribe audio to text' };
}

/** The chat body of a transcription, for the model whose chat template is `templateSource`. */
export function transcriptionToChat(fields: TranscriptionFields, templateSource: string): Record<string, unknown> {
  const preset = asrPreset(templateSource);
  const instruction = (fields.prompt || preset.user) + (fields.language ? ` (language: ${fields.language})` : '');
  return {
    messages: [
      ...(preset.system ? [{ role: 'system', content: preset.system }] : []),
      { role: 'user', content: [{ type: 'text', text: instruction }, { type: 'input_audio', input_audio: { data: Buffer.from(fields.audio).toString('base64') } }] },
    ],
    ...(fields.maxTokens !== undefined ? { max_tokens: fields.maxTokens } : {}),
    ...(fields.temperature !== undefined ? { temperature: fields.temperature } : {}),
  };
}

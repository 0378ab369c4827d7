#include "task-parse.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "errors-js.h"
#include "js-values.h"
#include "mtmd-helper.h"
#include "sampler.h"

namespace addon {

// ---------------------------------------------------------------------------------------------
// JS thread: reading

static std::vector<std::string> strings_from(Napi::Env env, Napi::Value v, const char * what) {
    std::vector<std::string> out;
    if (v.IsUndefined() || v.IsNull()) return out;
    if (!v.IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(what) + " must be an array of strings");
    Napi::Array arr = v.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
        if (!arr.Get(i).IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(what) + " must be an array of strings");
        out.push_back(arr.Get(i).As<Napi::String>());
    }
    return out;
}

static void read_prompt_tokens(Napi::Env env, Napi::Object o, CompletionTask & task) {
    Napi::Value prompt = o.Get("prompt");
    if (!prompt.IsTypedArray() || prompt.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.prompt must be an Int32Array of tokens");
    }
    Napi::Int32Array tokens = prompt.As<Napi::Int32Array>();
    task.prompt.assign(tokens.Data(), tokens.Data() + tokens.ElementLength());
}

// The image files are copied: the worker that decodes them must not read JS memory.
static void read_media(Napi::Env env, Napi::Object o, TaskRequest & request) {
    if (!o.Get("promptText").IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.promptText must be a string when task.media is given");
    request.has_media = true;
    request.prompt_text = o.Get("promptText").As<Napi::String>();
    Napi::Array media = o.Get("media").As<Napi::Array>();
    for (uint32_t i = 0; i < media.Length(); i++) {
        Napi::Value v = media.Get(i);
        if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.media entries must be Uint8Arrays");
        }
        Napi::Uint8Array bytes = v.As<Napi::Uint8Array>();
        request.media.emplace_back(bytes.Data(), bytes.Data() + bytes.ElementLength());
    }
}

static void read_lora_scales(Napi::Env env, Napi::Value value, size_t n_loras, CompletionTask & task) {
    task.lora_scales.assign(n_loras, 0.0f);
    if (!value.IsArray()) return;
    Napi::Array scales = value.As<Napi::Array>();
    if (scales.Length() > n_loras) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.loraScales has more entries than the engine has adapters");
    for (uint32_t i = 0; i < scales.Length(); i++) {
        Napi::Value v = scales.Get(i);
        double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
        if (!std::isfinite(x)) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.loraScales must be finite numbers");
        task.lora_scales[i] = static_cast<float>(x);
    }
}

// Whom the task belongs to (admission.h): tenant, tenantWeight, priorityClass, priority (within
// the tenant, lower first). Every field optional (absent or null: its default). The bounds are the
// tenant settings' own, as the TypeScript validator checks them: a weight above 0 and at most
// TENANT_MAX_WEIGHT, a known class; a field of another type is refused as well.
static void read_share(Napi::Env env, Napi::Object o, TenantShare & share) {
    const auto given = [&](const char * key) { return !o.Get(key).IsUndefined() && !o.Get(key).IsNull(); };
    if (given("tenant")) {
        if (!o.Get("tenant").IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.tenant must be a string");
        share.tenant = o.Get("tenant").As<Napi::String>().Utf8Value();
    }
    if (given("tenantWeight")) {
        const double w = o.Get("tenantWeight").IsNumber() ? o.Get("tenantWeight").As<Napi::Number>().DoubleValue() : NAN;
        if (!(w > 0 && w <= TENANT_MAX_WEIGHT)) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.tenantWeight must be a number above 0 and at most 100");
        share.weight = w;
    }
    if (given("priorityClass")) {
        const std::string c = o.Get("priorityClass").IsString() ? o.Get("priorityClass").As<Napi::String>().Utf8Value() : "";
        if (c != "interactive" && c != "batch") throw_coded(env, ErrorCode::INVALID_ARGUMENT, "task.priorityClass must be \"interactive\" or \"batch\"");
        share.priority_class = c == "batch" ? PriorityClass::PRIORITY_CLASS_BATCH : PriorityClass::PRIORITY_CLASS_INTERACTIVE;
    }
    share.priority = read_i32(o, "priority", 0);
}

// The fields of a completion (generation) task: a flat mapping.
static void read_generation(Napi::Env env, Napi::Object o, const TaskLimits & limits, CompletionTask & task) {
    task.n_predict = read_i32(o, "nPredict", -1);
    task.id_slot = read_i32(o, "idSlot", -1);
    if (task.id_slot >= limits.n_parallel) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "idSlot out of range");
    if (o.Get("cachePrompt").IsBoolean()) task.cache_prompt = o.Get("cachePrompt").As<Napi::Boolean>();
    if (o.Get("returnProgress").IsBoolean()) task.return_progress = o.Get("returnProgress").As<Napi::Boolean>();
    task.n_probs = std::max(0, read_i32(o, "nProbs", 0));
    if (o.Get("postSamplingProbs").IsBoolean()) task.post_sampling_probs = o.Get("postSamplingProbs").As<Napi::Boolean>();
    if (o.Get("tMaxPredictMs").IsNumber()) task.t_max_predict_ms = o.Get("tMaxPredictMs").As<Napi::Number>().Int64Value();
    task.n_indent = std::max(0, read_i32(o, "nIndent", 0));
    task.n_keep = std::max(-1, read_i32(o, "nKeep", 0));
    task.n_discard = std::max(0, read_i32(o, "nDiscard", 0));
    task.n_cache_reuse = std::max(0, read_i32(o, "nCacheReuse", 0));
    task.stop = strings_from(env, o.Get("stop"), "task.stop");
    read_lora_scales(env, o.Get("loraScales"), limits.n_loras, task);
    Napi::Value sampling = o.Get("sampling");
    sampling_params_from_js(env, sampling.IsObject() ? sampling.As<Napi::Object>() : Napi::Object::New(env), limits.model, limits.n_ctx_seq,
                            *limits.eog_tokens, task.sampling);
}

TaskRequest parse_task(Napi::Env env, Napi::Object o, const TaskLimits & limits) {
    TaskRequest request;
    request.task = std::make_unique<CompletionTask>();
    CompletionTask & task = *request.task;
    const bool embed = o.Get("kind").IsString() && o.Get("kind").As<Napi::String>().Utf8Value() == "embedding";
    task.kind = embed ? TaskKind::EMBEDDING : TaskKind::COMPLETION;
    if (o.Get("media").IsArray()) {
        read_media(env, o, request);
    } else {
        read_prompt_tokens(env, o, task);
    }
    read_share(env, o, task.share);
    if (embed) {
        task.cache_prompt = false;
        return request;
    }
    read_generation(env, o, limits, task);
    return request;
}

// ---------------------------------------------------------------------------------------------
// Any thread: preparing

// True when `bytes` start like a format stb_image decodes. Anything else (but audio, below) is
// refused before mtmd, which would otherwise try it as video (spawning ffprobe).
static bool looks_like_image(const uint8_t * b, size_t n) {
    auto starts = [&](const char * magic, size_t len) { return n >= len && std::memcmp(b, magic, len) == 0; };
    return starts("\x89PNG", 4) || starts("\xFF\xD8\xFF", 3) || starts("GIF8", 4) || starts("BM", 2) || starts("8BPS", 4) ||
           starts("#?RADIANCE", 10) || starts("#?RGBE", 6) || (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7');
}

// True when mtmd's helper takes `bytes` for audio (its own test, mtmd-helper.cpp is_audio_file):
// WAV (RIFF/WAVE), MP3 (an ID3 tag or an MPEG frame sync) or FLAC.
static bool looks_like_audio(const uint8_t * b, size_t n) {
    if (n < 12) return false;
    const bool wav = std::memcmp(b, "RIFF", 4) == 0 && std::memcmp(b + 8, "WAVE", 4) == 0;
    const bool mp3 = std::memcmp(b, "ID3", 3) == 0 || (b[0] == 0xFF && (b[1] & 0xE0) == 0xE0);
    return wav || mp3 || std::memcmp(b, "fLaC", 4) == 0;
}

// FNV-1a of a media file: the prompt cache reuses an image or a clip only when it is the same file.
static uint64_t media_file_hash(const std::vector<uint8_t> & bytes) {
    uint64_t hash = 1469598103934665603ull;
    for (uint8_t b : bytes) hash = (hash ^ b) * 1099511628211ull;
    return hash;
}

// Longest audio clip accepted: mtmd's helper sizes its sample buffer from the length a file
// declares before reading it, so a FLAC header claiming days of audio would make it allocate (and
// zero) gigabytes; and every 30 s of audio is a chunk of projector positions, a context's worth
// long before an hour.
constexpr double MAX_AUDIO_SECONDS = 3600;

// Seconds of audio a FLAC file's STREAMINFO declares (-1 when it declares no length or no rate).
// Layout: "fLaC", a 4-byte block header, then STREAMINFO: block sizes (2+2 bytes), frame sizes
// (3+3), then 20 bits of sample rate, 3 of channels, 5 of bits per sample, 36 of total samples.
static double flac_declared_seconds(const uint8_t * b, size_t n) {
    if (n < 8 + 18 || std::memcmp(b, "fLaC", 4) != 0 || (b[4] & 0x7F) != 0) return -1;
    const uint8_t * info = b + 8;
    const uint32_t rate = (static_cast<uint32_t>(info[10]) << 12) | (static_cast<uint32_t>(info[11]) << 4) | (info[12] >> 4);
    const uint64_t total = (static_cast<uint64_t>(info[13] & 0x0F) << 32) | (static_cast<uint64_t>(info[14]) << 24) |
                           (static_cast<uint64_t>(info[15]) << 16) | (static_cast<uint64_t>(info[16]) << 8) | info[17];
    if (rate == 0 || total == 0) return -1;
    return static_cast<double>(total) / rate;
}

// Seconds of audio in an MP3's MPEG frames, walked from the start (after an ID3v2 tag): each
// frame's length and sample count come from its 4-byte header, and a byte that does not start a
// frame is skipped, as a decoder resyncs. -1 when a free-format frame (its length not in its
// header) makes the walk stop. mtmd's helper decodes the whole file before its length is known:
// 20 MB of 8 kbit/s frames are 5.8 hours, 1.3 GB of samples at 16 kHz.
static double mp3_seconds(const uint8_t * b, size_t n) {
    // kbit/s by [MPEG-1 / MPEG-2 and 2.5][layer I, II, III][bitrate index]
    static const uint16_t kbps[2][3][15] = {
        {{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
         {0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
         {0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}},
        {{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
         {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
         {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}}};
    static const uint32_t mpeg1_rates[3] = {44100, 48000, 32000};  // halved for MPEG-2, quartered for 2.5
    size_t i = 0;
    if (n >= 10 && std::memcmp(b, "ID3", 3) == 0) {
        i = 10 + ((static_cast<size_t>(b[6] & 0x7F) << 21) | (static_cast<size_t>(b[7] & 0x7F) << 14) | (static_cast<size_t>(b[8] & 0x7F) << 7) | (b[9] & 0x7F));
        if (b[5] & 0x10) i += 10;  // a footer
    }
    double seconds = 0;
    while (i + 4 <= n) {
        const uint8_t * h = b + i;
        const int version = (h[1] >> 3) & 3;  // 0: MPEG-2.5, 1: reserved, 2: MPEG-2, 3: MPEG-1
        const int layer = (h[1] >> 1) & 3;    // 1: III, 2: II, 3: I, 0: reserved
        const int bitrate_index = h[2] >> 4;
        const int rate_index = (h[2] >> 2) & 3;
        if (h[0] != 0xFF || (h[1] & 0xE0) != 0xE0 || version == 1 || layer == 0 || bitrate_index == 15 || rate_index == 3) {
            i++;
            continue;
        }
        if (bitrate_index == 0) return -1;
        const bool mpeg1 = version == 3;
        const uint32_t rate = mpeg1_rates[rate_index] >> (mpeg1 ? 0 : version == 2 ? 1 : 2);
        const uint32_t bitrate = kbps[mpeg1 ? 0 : 1][3 - layer][bitrate_index] * 1000u;
        const uint32_t padding = (h[2] >> 1) & 1;
        size_t length = 0;
        uint32_t samples = 0;
        if (layer == 3) {  // layer I: 4-byte slots
            length = (12 * bitrate / rate + padding) * 4;
            samples = 384;
        } else if (layer == 2) {
            length = 144 * bitrate / rate + padding;
            samples = 1152;
        } else {
            length = (mpeg1 ? 144 : 72) * bitrate / rate + padding;
            samples = mpeg1 ? 1152 : 576;
        }
        seconds += static_cast<double>(samples) / rate;
        i += std::max<size_t>(length, 1);
    }
    return seconds;
}

// One media file of a prompt, decoded: an image (RGB pixels) or an audio clip (mono samples at
// the projector's rate), as the projector reads it.
static mtmd::bitmap decode_media(mtmd_context * projector, const std::vector<uint8_t> & bytes, size_t i) {
    constexpr uint64_t max_pixels = 64ull * 1024 * 1024;
    const bool audio = looks_like_audio(bytes.data(), bytes.size());
    if (!audio && !looks_like_image(bytes.data(), bytes.size())) {
        throw Refusal(ErrorCode::BAD_MEDIA, "media file " + std::to_string(i) + " is not in a supported format (PNG, JPEG, GIF, BMP, PSD, HDR or PNM images; WAV, MP3 or FLAC audio)");
    }
    const std::string which = (audio ? "audio clip " : "image ") + std::to_string(i);
    if (audio && !mtmd_support_audio(projector)) throw Refusal(ErrorCode::NOT_SUPPORTED, which + ": this model's projector does not read audio");
    if (!audio && !mtmd_support_vision(projector)) throw Refusal(ErrorCode::NOT_SUPPORTED, which + ": this model's projector does not read images");
    const auto too_long = [&] { return Refusal(ErrorCode::BAD_MEDIA, which + " is longer than an hour"); };
    if (audio && flac_declared_seconds(bytes.data(), bytes.size()) > MAX_AUDIO_SECONDS) throw too_long();
    // An MP3's frames, counted before it is decoded (a second of slack for an encoder's header
    // frame and stray syncs; the decoded length is checked below).
    const bool mp3 = audio && std::memcmp(bytes.data(), "fLaC", 4) != 0 && std::memcmp(bytes.data(), "RIFF", 4) != 0;
    if (mp3 && mp3_seconds(bytes.data(), bytes.size()) > MAX_AUDIO_SECONDS + 1) throw too_long();
    mtmd_helper_bitmap_wrapper decoded = mtmd_helper_bitmap_init_from_buf(projector, bytes.data(), bytes.size(), false, mtmd_helper_init_opt_default());
    mtmd::bitmap bitmap(decoded.bitmap);
    mtmd_helper::video_ptr video(decoded.video_ctx);
    if (!bitmap.ptr || mtmd_bitmap_is_audio(bitmap.ptr.get()) != audio) throw Refusal(ErrorCode::BAD_MEDIA, which + " could not be decoded (corrupt or truncated)");
    if (audio && bitmap.n_bytes() < sizeof(float)) throw Refusal(ErrorCode::BAD_MEDIA, which + " holds no audio samples");
    if (audio && bitmap.n_bytes() / sizeof(float) > MAX_AUDIO_SECONDS * mtmd_get_audio_sample_rate(projector)) throw too_long();
    if (!audio && static_cast<uint64_t>(bitmap.nx()) * bitmap.ny() > max_pixels) throw Refusal(ErrorCode::BAD_MEDIA, which + " is too large (more than 64 megapixels)");
    return bitmap;
}

// A chunk's hash: task-parse sets a media chunk's id to its file's hash (decimal), so that a
// clip cut into several chunks (one per 30 s of audio) gives each of them the file's hash.
static uint64_t chunk_file_hash(const mtmd_input_chunk * chunk) {
    const char * id = mtmd_input_chunk_get_id(chunk);
    return id ? std::strtoull(id, nullptr, 10) : 0;
}

// Appends mtmd's chunks to the task's prompt: text tokens as they are, each image or audio chunk
// as n_pos placeholder positions (LLAMA_TOKEN_NULL) and a MediaSpan that owns a copy of it.
static void append_chunks(const mtmd::input_chunks & chunks, CompletionTask & task) {
    for (size_t i = 0; i < chunks.size(); i++) {
        const mtmd_input_chunk * chunk = chunks[i];
        const auto type = mtmd_input_chunk_get_type(chunk);
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n_tokens = 0;
            const llama_token * tokens = mtmd_input_chunk_get_tokens_text(chunk, &n_tokens);
            task.prompt.insert(task.prompt.end(), tokens, tokens + n_tokens);
            continue;
        }
        MediaSpan span;
        span.start = task.prompt.size();
        span.n_pos = static_cast<size_t>(mtmd_input_chunk_get_n_pos(chunk));
        span.hash = chunk_file_hash(chunk);
        span.chunk.reset(mtmd_input_chunk_copy(chunk));
        task.prompt.insert(task.prompt.end(), span.n_pos, LLAMA_TOKEN_NULL);
        task.media.push_back(std::move(span));
    }
}

// Media in a prompt: `prompt_text` holds the projector's media marker once per image or audio
// clip. The files are decoded and the prompt tokenized here; encoding waits for the engine thread.
static void tokenize_media(TaskRequest & request, const TaskLimits & limits) {
    if (!limits.vision) throw Refusal(ErrorCode::NOT_SUPPORTED, "this engine has no multimodal projector (-mm)");
    const std::string & text = request.prompt_text;
    const std::string marker = mtmd_get_marker(limits.vision);
    size_t n_markers = 0;
    for (size_t pos = text.find(marker); pos != std::string::npos; pos = text.find(marker, pos + marker.size())) n_markers++;
    if (n_markers != request.media.size()) {
        throw Refusal(ErrorCode::BAD_MEDIA, "the number of images and audio clips (" + std::to_string(request.media.size()) +
                                                ") does not match the number of media markers \"" + marker + "\" in the prompt (" +
                                                std::to_string(n_markers) + ")");
    }
    mtmd::bitmaps bitmaps;
    for (size_t i = 0; i < request.media.size(); i++) {
        bitmaps.entries.push_back(decode_media(limits.vision, request.media[i], i));
        // The chunks keep the hash as their id, so that an image restored from a slot file matches.
        bitmaps.entries.back().set_id(std::to_string(media_file_hash(request.media[i])).c_str());
    }
    mtmd::input_chunks chunks(mtmd_input_chunks_init());
    mtmd_input_text input{text.c_str(), text.size(), true, true};
    std::vector<const mtmd_bitmap *> bitmap_ptrs = bitmaps.c_ptr();
    const int32_t ret = mtmd_tokenize(limits.vision, chunks.ptr.get(), &input, bitmap_ptrs.data(), bitmap_ptrs.size());
    if (ret != 0) {
        throw Refusal(ErrorCode::BAD_MEDIA, ret == 1 ? "the number of images and audio clips does not match the number of media markers in the prompt"
                                                     : "an image or audio clip could not be preprocessed");
    }
    append_chunks(chunks, *request.task);
    const CompletionTask & task = *request.task;
    if (!task.media.empty() && task.media.back().start + task.media.back().n_pos == task.prompt.size()) {
        throw Refusal(ErrorCode::BAD_MEDIA, "the prompt must continue with text after its last image or audio clip");
    }
}

static void check_tokens(const std::vector<llama_token> & prompt, const llama_vocab * vocab) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (llama_token t : prompt) {
        if (t < 0 || t >= n_vocab) throw Refusal(ErrorCode::TOKEN_OUT_OF_RANGE, "prompt token out of range: " + std::to_string(t));
    }
}

// The prompt fits one slot; an embedding input fits one batch; the task's kind is the engine's.
static void check_fits(const CompletionTask & task, const TaskLimits & limits) {
    const double n_prompt = static_cast<double>(task.prompt.size());
    if (task.prompt.empty()) throw Refusal(ErrorCode::EMPTY_PROMPT, "the prompt is empty");
    if (static_cast<int32_t>(task.prompt.size()) >= limits.n_ctx_seq) {
        throw Refusal(ErrorCode::EXCEEDS_CONTEXT,
                      "the prompt (" + std::to_string(task.prompt.size()) + " tokens) does not fit the context of " +
                          std::to_string(limits.n_ctx_seq) + " tokens",
                      {{"nPromptTokens", n_prompt}, {"nCtx", static_cast<double>(limits.n_ctx_seq)}});
    }
    const bool embed = task.kind == TaskKind::EMBEDDING;
    if (embed != limits.embeddings) {
        throw Refusal(ErrorCode::NOT_SUPPORTED, limits.embeddings ? "this engine embeds inputs (embedding mode); it does not generate"
                                                                  : "this engine generates text; embeddings need an engine created with embeddings: true");
    }
    if (embed && task.prompt.size() > limits.n_batch) {
        throw Refusal(ErrorCode::EXCEEDS_BATCH,
                      "the input (" + std::to_string(task.prompt.size()) + " tokens) is larger than the batch size of " +
                          std::to_string(limits.n_batch) + " tokens",
                      {{"nPromptTokens", n_prompt}, {"nBatch", static_cast<double>(limits.n_batch)}});
    }
}

// The prompt's tokens: images decoded and tokenized around the text, or the token ids checked.
static void tokenize_prompt(TaskRequest & request, const TaskLimits & limits) {
    if (!request.has_media) {
        check_tokens(request.task->prompt, limits.vocab);
        return;
    }
    try {
        tokenize_media(request, limits);
    } catch (const Refusal &) {
        throw;
    } catch (const std::exception & e) {
        throw Refusal(ErrorCode::BAD_MEDIA, std::string("an image or audio clip could not be preprocessed: ") + e.what());
    }
}

void prepare_task(TaskRequest & request, const TaskLimits & limits) {
    CompletionTask & task = *request.task;
    tokenize_prompt(request, limits);
    check_fits(task, limits);
    if (task.kind == TaskKind::COMPLETION) task.sampler.reset(sampler_create(limits.model, task.sampling));
}

size_t count_prompt_tokens(TaskRequest & request, const TaskLimits & limits) {
    tokenize_prompt(request, limits);
    // The prompt holds n_pos positions per image; llama-server counts the image's tokens.
    size_t n = request.task->prompt.size();
    for (const auto & span : request.task->media) n = n - span.n_pos + mtmd_input_chunk_get_n_tokens(span.chunk.get());
    return n;
}

}  // namespace addon

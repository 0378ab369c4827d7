#pragma once
// Sampling parameters: conversion of the plain JS object TypeScript validated into llama.cpp's
// common_params_sampling (JS thread, at submit), and construction of the per-request sampler
// chain (common_sampler, the same chain llama-server builds), which parses the grammar and so runs
// on the worker that prepares the task.
#include <napi.h>

#include "common.h"

struct common_sampler;

namespace addon {

// Fills `out` from `params` (see src/native/binding.ts, SamplingParams). `n_ctx_seq` resolves
// the "-1 = whole context" convention of repeat_last_n and dry_penalty_last_n; `eog_tokens` (the
// model's end-of-generation tokens, Model::eog_tokens) are biased out with ignore_eos. Throws a coded
// INVALID_ARGUMENT Napi::Error for wrong types, a Refusal (TOKEN_OUT_OF_RANGE) for a bias on a
// token outside the vocabulary.
void sampling_params_from_js(Napi::Env env, Napi::Object params, const llama_model * model, int32_t n_ctx_seq,
                             const std::vector<llama_token> & eog_tokens, common_params_sampling & out);

// Any thread. Throws a Refusal (BAD_SAMPLING, message starting "invalid sampling parameters:")
// when llama.cpp refuses the parameters or the grammar.
common_sampler * sampler_create(const llama_model * model, common_params_sampling & params);

// jsonSchemaToGrammar(schemaJson: string) -> GBNF string. Throws BAD_SCHEMA on an unsupported schema.
// The schema is passed as JSON text: it is data for llama.cpp's converter, not a request.
Napi::Value json_schema_to_grammar_js(const Napi::CallbackInfo & info);

}  // namespace addon

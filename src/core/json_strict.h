// json_strict.h — strict JSON reading for wgtrain's file formats (safetensors headers,
// meta.json, the run configuration, metrics.jsonl rows). cJSON on its own is lenient: it
// ignores trailing garbage, keeps duplicate keys (and lookups return the first), accepts
// leading zeros, raw control characters and invalid UTF-8 in strings, and a "\u0000" escape
// silently truncates a name. json_parse_strict first checks the text against RFC 8259 (valid
// UTF-8, no lone surrogates, no NUL, nothing but whitespace after the value), then builds the
// cJSON tree and refuses duplicate keys, so a file is either what a writer produced or refused.
// A byte order mark is refused too (RFC 8259 forbids writing one; no writer here does), and
// nesting deeper than JSON_MAX_DEPTH is reported as too deep.
#ifndef WGT_JSON_STRICT_H
#define WGT_JSON_STRICT_H
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "core/error.h"

// Every number must be a non-negative integer written without sign, fraction or exponent, at
// most 2^53 - 1 (so that cJSON's double holds it exactly). For safetensors headers.
#define JSON_INTEGERS_ONLY 1u
#define JSON_MAX_DEPTH 64
#define JSON_MAX_SAFE_INT 9007199254740991LL  // 2^53 - 1

// Parses text[0..n) (NUL bytes inside count as errors). `what` names the text in messages.
wgt_status json_parse_strict(cJSON **out, const char *text, size_t n, unsigned flags, const char *what);
// The same; *err_at gets the byte offset where the text stopped being valid JSON (0 when the
// failure is not one of syntax: a duplicate key, memory).
wgt_status json_parse_strict_at(cJSON **out, const char *text, size_t n, unsigned flags, const char *what, size_t *err_at);

// 1 when `it` is a number holding an integer in [lo, hi] (with |lo|, |hi| <= 2^53 - 1), stored
// in *out; 0 otherwise (not a number, fractional, out of range): no conversion is ever undefined.
int json_int_in(const cJSON *it, int64_t lo, int64_t hi, int64_t *out);
#endif

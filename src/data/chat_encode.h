// chat_encode.h — a list of chat messages to token ids and their loss mask, the one path that
// `wgtrain tokenize --chat [--mask]` and `wgtrain prepare` of JSONL {"messages": [...]} records
// share: the model's chat template (tokenizer_config.json, or a template file) renders the
// messages as transformers' apply_chat_template does, the Hugging Face tokenizer encodes the
// text without added special tokens (the template writes them), and an id is trained when its
// bytes overlap an assistant message's content, or it follows such a run up to and including the
// first special token (the end of the turn) (docs/chat-templates.md).
#ifndef WGT_CHAT_ENCODE_H
#define WGT_CHAT_ENCODE_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include <cjson/cJSON.h>
#include "data/text_tokenizer.h"

typedef struct chat_encoder chat_encoder;

// tok: a Hugging Face tokenizer (borrowed; outlives the encoder); spec names it in messages;
// template_file: a Jinja2 file to use instead of the config's chat_template (NULL: the config's).
wgt_status chat_encoder_init(chat_encoder **out, const text_tokenizer *tok, const char *spec, const char *template_file);
void chat_encoder_free(chat_encoder *e);
// messages: a JSON array of {"role", "content", ...} (borrowed). *ids (and *mask when mask is not
// NULL: one 0/1 per id, 1 = trained) are malloc'd.
wgt_status chat_encoder_encode(chat_encoder *e, const cJSON *messages, int add_generation_prompt, uint32_t **ids,
                               size_t *n_ids, uint8_t **mask);
#endif

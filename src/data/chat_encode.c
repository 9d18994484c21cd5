// chat_encode.c — chat messages to ids and loss mask (see chat_encode.h).
#include "data/chat_encode.h"
#include <stdlib.h>
#include <string.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/chat_template.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_kind.h"

#define CHAT_MAX_TEMPLATE_BYTES (16u << 20)  // real chat templates: < 64 KB

struct chat_encoder {
    const text_tokenizer *tok;
    const hf_tokenizer *hf;
    cJSON *cfg;              // tokenizer_config.json (NULL when there is none)
    chat_template *tmpl;
};

wgt_status chat_encoder_init(chat_encoder **out, const text_tokenizer *tok, const char *spec, const char *template_file) {
    *out = NULL;
    if (strcmp(text_tokenizer_kind_name(tok), HF_KIND_NAME))
        return wgt_fail(WGT_ERR_ARG, "chat messages need a Hugging Face tokenizer (a tokenizer.json and its "
                        "tokenizer_config.json); %s is a %s tokenizer", spec, text_tokenizer_kind_name(tok));
    chat_encoder *e = wgt_calloc(1, sizeof *e);
    e->tok = tok;
    e->hf = hf_kind_tokenizer(text_tokenizer_impl(tok));
    size_t cn = 0, tn = 0;
    const char *config = hf_kind_config(text_tokenizer_impl(tok), &cn);
    char *tfile = NULL;
    const char *ttext = NULL;
    wgt_status st = WGT_OK;
    if (config) st = json_parse_strict(&e->cfg, config, cn, 0, HF_CONFIG_FILE);
    if (st == WGT_OK && template_file) {
        st = file_read_all(template_file, "chat template", "pass a Jinja2 template file", CHAT_MAX_TEMPLATE_BYTES, &tfile, &tn);
        ttext = tfile;
    } else if (st == WGT_OK && !e->cfg) {
        st = wgt_fail(WGT_ERR_CONFIG, "%s has no tokenizer_config.json beside its tokenizer.json, so no chat template; "
                      "pass --chat-template FILE", spec);
    } else if (st == WGT_OK) {
        st = chat_template_from_config(e->cfg, NULL, &ttext);
        if (st == WGT_OK) tn = strlen(ttext);
        else {
            char *why = wgt_strdup(wgt_last_error());
            st = wgt_fail(st, "%s; for %s pass --chat-template FILE", why, spec);
            free(why);
        }
    }
    if (st == WGT_OK) st = chat_template_parse(ttext, tn, &e->tmpl);
    free(tfile);
    if (st != WGT_OK) {
        chat_encoder_free(e);
        return st;
    }
    *out = e;
    return WGT_OK;
}

void chat_encoder_free(chat_encoder *e) {
    if (!e) return;
    chat_template_free(e->tmpl);
    cJSON_Delete(e->cfg);
    free(e);
}

// The trained ids of a rendered chat: an id is trained when its bytes overlap an assistant
// message's content, and so are the ids after such a run, up to and including the first special
// token (the end of the turn), unless one of them overlaps another message's content first.
// Token offsets come from the tokens' bytes, which must spell the text.
static wgt_status chat_mask(const text_tokenizer *tok, const hf_tokenizer *hf, const chat_template_output *r,
                            const cJSON *messages, const uint32_t *ids, size_t n_ids, uint8_t *mask) {
    int n_msg = cJSON_GetArraySize(messages);
    uint8_t *asst_msg = wgt_calloc((size_t)n_msg + 1, 1);  // per message: role is "assistant"
    int k = 0;
    for (const cJSON *m = messages->child; m && k < n_msg; m = m->next, k++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        asst_msg[k] = cJSON_IsString(r) && !strcmp(r->valuestring, "assistant");
    }
    wgt_status st = WGT_OK;
    size_t pos = 0;
    int in_turn = 0;  // after an assistant's content, before its end of turn
    for (size_t i = 0; i < n_ids; i++) {
        size_t len = 0;
        const uint8_t *b = text_tokenizer_token_bytes(tok, (int)ids[i], &len);
        // a SentencePiece-style normaliser (Prepend "▁", Llama-2, TinyLlama, Mistral) puts a space
        // before each text segment that the rendered text does not have: the token spells the text
        // after that space
        if (b && len >= 1 && b[0] == ' ' && len - 1 <= r->n - pos && (pos == r->n || r->text[pos] != ' ') &&
            !memcmp(b + 1, r->text + pos, len - 1))
            b++, len--;
        if (!b || len > r->n - pos || memcmp(b, r->text + pos, len)) {
            free(asst_msg);
            return wgt_fail(WGT_ERR_FORMAT, "the loss mask: the bytes of token #%zu (id %u) do not continue the rendered "
                            "text at byte %zu (the tokenizer's normaliser changes the text), so tokens cannot be matched "
                            "to messages", i + 1, ids[i], pos);
        }
        int asst = 0, other = 0;
        for (size_t j = pos; j < pos + len; j++) {
            int32_t s = r->source[j];
            WGT_ASSERT(s < n_msg, "a rendered byte's source is beyond the messages");
            if (s >= 0 && asst_msg[s]) asst = 1;
            else if (s >= 0) other = 1;
        }
        pos += len;
        if (asst) {
            mask[i] = 1;
            in_turn = 1;
        } else if (in_turn && !other) {
            mask[i] = 1;
            if (hf_tokenizer_is_special(hf, ids[i])) in_turn = 0;
        } else {
            mask[i] = 0;
            in_turn = 0;
        }
    }
    free(asst_msg);
    if (pos != r->n)
        st = wgt_fail(WGT_ERR_FORMAT, "the loss mask: the tokens' bytes end at byte %zu of the %zu rendered", pos, r->n);
    return st;
}

wgt_status chat_encoder_encode(chat_encoder *e, const cJSON *messages, int add_generation_prompt, uint32_t **ids,
                               size_t *n_ids, uint8_t **mask) {
    *ids = NULL;
    *n_ids = 0;
    if (mask) *mask = NULL;
    if (!cJSON_IsArray(messages))
        return wgt_fail(WGT_ERR_ARG, "chat messages must be a JSON array, such as [{\"role\": \"user\", \"content\": \"Hi\"}]");
    cJSON *ctx = cJSON_CreateObject();
    cJSON *copy = cJSON_Duplicate(messages, 1);
    WGT_ASSERT(ctx && copy, "out of host memory");
    cJSON_AddItemToObject(ctx, "messages", copy);
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt);
    wgt_status st = WGT_OK;
    if (e->cfg) st = chat_template_add_special_tokens(e->cfg, ctx);
    chat_template_output r = {0};
    chat_template_opts opts = {.now = -1, .limits = NULL};
    if (st == WGT_OK) st = chat_template_render(e->tmpl, ctx, &opts, &r);
    if (st == WGT_OK) st = hf_tokenizer_encode(e->hf, (const uint8_t *)r.text, r.n, 0, ids, n_ids);
    if (st == WGT_OK && mask) {
        *mask = wgt_malloc(*n_ids + 1);
        st = chat_mask(e->tok, e->hf, &r, copy, *ids, *n_ids, *mask);
    }
    if (st != WGT_OK) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
        if (mask) {
            free(*mask);
            *mask = NULL;
        }
    }
    chat_template_output_free(&r);
    cJSON_Delete(ctx);
    return st;
}

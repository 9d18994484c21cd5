// fuzz_hf_tokenizer.c — mutation fuzzer for hf_tokenizer_load_text and the encoder: two small
// tokenizer.json files built here (byte-level with a Split regex, NFC and flagged added tokens;
// SentencePiece-style with Prepend/Replace, byte_fallback and its decoders), mutated as text.
// An accepted file must encode the sample texts into ids below its vocabulary size that decode
// without error. Every 4th input instead mutates the text given to the unmutated tokenizers:
// valid UTF-8 must encode (and for the byte-level one, decode back to itself), invalid UTF-8 must
// be refused.
#include "fuzzlib.h"
#include "data/hf_tokenizer.h"

static void json_str(fz_buf *b, const char *s) {
    fz_insert(b, b->n, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fz_insert(b, b->n, "\\", 1);
        fz_insert(b, b->n, s, 1);
    }
    fz_insert(b, b->n, "\"", 1);
}
static void put(fz_buf *b, const char *s) { fz_insert(b, b->n, s, strlen(s)); }

// The byte-level alphabet of GPT-2: byte b as a UTF-8 character.
static void byte_char(int b, char out[4]) {
    int k = 0, self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    unsigned cp = (unsigned)b;
    if (!self) {
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) k++;
        cp = 256u + (unsigned)k;
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static void seed_bytelevel(fz_buf *b) {
    b->n = 0;
    put(b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
           "{\"id\":262,\"content\":\"<|bos|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
           "{\"id\":263,\"content\":\"<tag>\",\"single_word\":true,\"lstrip\":true,\"rstrip\":true,\"normalized\":true,\"special\":false}],"
           "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
           "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
           "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Digits\",\"individual_digits\":true},"
           "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]},"
           "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|bos|>\",\"type_id\":0}},"
           "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<|bos|>\":{\"id\":\"<|bos|>\",\"ids\":[262],"
           "\"tokens\":[\"<|bos|>\"]}}},\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
           "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
           "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":true,\"vocab\":{");
    char c[4];
    char num[16];
    for (int i = 0; i < 256; i++) {
        byte_char(i, c);
        json_str(b, c);
        snprintf(num, sizeof num, ":%d,", i);
        put(b, num);
    }
    put(b, "\"th\":256,\"the\":257,\"\xc4\xa0t\":258,\"\xc4\xa0the\":259,\"at\":260,\"cat\":261},\"merges\":["
           "\"t h\",[\"th\",\"e\"],\"\xc4\xa0 t\",\"\xc4\xa0 the\",\"a t\",\"c at\"]}}");
}

static void seed_sentencepiece(fz_buf *b) {
    b->n = 0;
    put(b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
           "{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
           "{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
           "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
           "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null,"
           "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
           "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
           "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},\"content\":\" \"},"
           "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
           "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
           "\"fuse_unk\":true,\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,\"<s>\":1,");
    char num[32];
    for (int i = 0; i < 256; i++) {
        snprintf(num, sizeof num, "\"<0x%02X>\":%d,", i, i + 2);
        put(b, num);
    }
    put(b, "\"\xe2\x96\x81\":258,\"a\":259,\"t\":260,\"c\":261,\"at\":262,\"cat\":263,\"\xe2\x96\x81""cat\":264},\"merges\":["
           "\"a t\",\"c at\",\"\xe2\x96\x81 cat\"]}}");
}

static const char *const samples[] = {"the cat sat", "  The  CAT's 12345 \t\n<|bos|> x<tag> <tag> y", "caf\xc3\xa9 e\xcc\x81 \xe6\x97\xa5\xf0\x9f\x98\x80",
                                       "<s>cat<s> \xe2\x96\x81", ""};

static void exercise(const hf_tokenizer *t) {
    for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
        for (int sp = 0; sp < 2; sp++) {
            uint32_t *ids = NULL;
            size_t n = 0;
            if (hf_tokenizer_encode(t, (const uint8_t *)samples[s], strlen(samples[s]), sp, &ids, &n) != WGT_OK) continue;
            for (size_t i = 0; i < n; i++) FZ_CHECK(ids[i] < hf_tokenizer_vocab_size(t), "id %u >= vocab", ids[i]);
            uint8_t *out = NULL;
            size_t no = 0;
            FZ_CHECK(hf_tokenizer_decode(t, ids, n, &out, &no) == WGT_OK, "decode of encoded ids fails: %s", wgt_last_error());
            free(out);
            free(ids);
        }
    }
}

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    fz_buf seed[2] = {{0}, {0}}, b = {0};
    seed_bytelevel(&seed[0]);
    seed_sentencepiece(&seed[1]);
    hf_tokenizer *base[2];
    for (int k = 0; k < 2; k++)
        if (hf_tokenizer_load_text(&base[k], (const char *)seed[k].p, seed[k].n, "seed.json") != WGT_OK) {
            fprintf(stderr, "seed %d refused: %s\n", k, wgt_last_error());
            return 2;
        }
    for (long it = 0; it < iters; it++) {
        int k = (int)(it & 1);
        if (it % 4 == 3) {  // mutate the text, not the file
            const char *s = samples[fz_below(4)];
            fz_set(&b, s, strlen(s));
            fz_mutate(&b, 1);
            uint32_t *ids = NULL;
            size_t n = 0;
            int valid = 1;
            for (size_t i = 0; i < b.n && valid;) {  // UTF-8 validity, decided independently
                uint8_t c = b.p[i];
                size_t l = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
                if (!l || i + l > b.n) { valid = 0; break; }
                uint32_t v = l == 1 ? c : (uint32_t)(c & (0xFF >> (l + 1)));
                for (size_t j = 1; j < l; j++) {
                    if ((b.p[i + j] & 0xC0) != 0x80) valid = 0;
                    v = v << 6 | (b.p[i + j] & 0x3F);
                }
                if (valid && ((l == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) || (l == 4 && (v < 0x10000 || v > 0x10FFFF)))) valid = 0;
                i += l;
            }
            wgt_status st = hf_tokenizer_encode(base[k], b.p, b.n, (int)(it & 2), &ids, &n);
            FZ_CHECK((st == WGT_OK) == valid, "encode of %s UTF-8 gave status %d", valid ? "valid" : "invalid", st);
            if (st == WGT_OK) {
                uint8_t *out = NULL;
                size_t no = 0;
                FZ_CHECK(hf_tokenizer_decode(base[k], ids, n, &out, &no) == WGT_OK, "decode fails: %s", wgt_last_error());
                // byte-level BPE without BOS is lossless on text NFC leaves alone (ASCII) and without the
                // added token <tag>, whose lstrip / rstrip take the spaces around it
                int ascii = !memchr(b.p, '<', b.n);
                for (size_t i = 0; i < b.n; i++) ascii &= b.p[i] < 0x80;
                if (k == 0 && !(it & 2) && ascii) FZ_CHECK(no == b.n && !memcmp(out, b.p, no), "byte-level round trip fails");
                free(out);
                free(ids);
            }
            continue;
        }
        fz_set(&b, seed[k].p, seed[k].n);
        fz_mutate(&b, 1);
        hf_tokenizer *t = NULL;
        if (hf_tokenizer_load_text(&t, (const char *)b.p, b.n, "in.json") != WGT_OK) {
            FZ_CHECK(t == NULL, "refused load returned a tokenizer");
            continue;
        }
        accepted++;
        exercise(t);
        hf_tokenizer_free(t);
    }
    for (int k = 0; k < 2; k++) {
        hf_tokenizer_free(base[k]);
        free(seed[k].p);
    }
    free(b.p);
    return fz_finish("fuzz_hf_tokenizer", iters, accepted);
}

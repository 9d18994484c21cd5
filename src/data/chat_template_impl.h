// chat_template_impl.h — what the chat-template parser (chat_template_parse.c) and evaluator
// (chat_template.c) share: a bump arena with a byte cap, the syntax tree, and error exits.
// Errors inside both unwind with longjmp to the public entry point, which turns them into a
// wgt_status with the message; everything allocated lives in the arena, so nothing leaks.
#ifndef WGT_CHAT_TEMPLATE_IMPL_H
#define WGT_CHAT_TEMPLATE_IMPL_H
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include "data/chat_template.h"

typedef struct ct_arena_block ct_arena_block;
typedef struct ct_arena {
    ct_arena_block *head;
    size_t used, cap;  // bytes handed out so far, and the most allowed
    jmp_buf *fail;     // where an allocation past cap jumps (after wgt_fail)
} ct_arena;
void *ct_alloc(ct_arena *a, size_t n);      // zeroed; n may be 0
void *ct_alloc_raw(ct_arena *a, size_t n);  // not zeroed
void ct_arena_free(ct_arena *a);
// a * b, or a jump to a->fail with a message when it overflows size_t.
size_t ct_mul(ct_arena *a, size_t x, size_t y);

typedef enum ct_kind {
    // statements
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_SET_BLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_GENERATION,
    // expressions
    E_STR, E_INT, E_FLOAT, E_BOOL, E_NONE, E_NAME, E_ATTR, E_INDEX, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN,
    E_NOT, E_NEG, E_POS, E_AND, E_OR, E_COND, E_LIST, E_TUPLE, E_DICT,
} ct_kind;

// binary operators (E_BIN's op)
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT,
       OP_GE, OP_IN, OP_NOTIN };

typedef struct ct_node ct_node;
typedef struct ct_nodes {
    ct_node **p;
    size_t n;
} ct_nodes;
typedef struct ct_names {
    const char **p;  // NUL-terminated names
    size_t n;
} ct_names;

struct ct_node {
    ct_kind kind;
    int line;
    int op;           // E_BIN operator; E_TEST: 1 = negated (is not)
    const char *s;    // N_TEXT text, string constant, name, attribute, filter/test/macro name
    size_t n;         // its length in bytes
    const char *s2;   // N_SET_ATTR: the attribute
    int64_t i;        // E_INT, E_BOOL
    double f;         // E_FLOAT
    ct_node *a, *b, *c, *d;
    ct_nodes body;    // statement body; call / filter / test positional arguments; list items; dict keys
    ct_nodes other;   // else body; keyword-argument values; dict values; macro defaults (NULL = none)
    ct_names names;   // for / set targets, keyword-argument names, macro parameters
};

struct chat_template {
    ct_arena arena;
    ct_nodes body;
};

// 1 when the evaluator implements the filter / test of that name (the parser refuses others).
int ct_filter_known(const char *name);
int ct_test_known(const char *name);

// Parses into t (t->arena set up); on failure returns the status after wgt_fail.
wgt_status ct_parse(chat_template *t, const char *src, size_t n);
#endif

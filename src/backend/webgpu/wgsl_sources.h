// wgsl_sources.h — the WGSL files of kernels/, embedded into the binary at build time
// (tools/embed_wgsl.c generates the table), so the binary never looks for shader files.
#ifndef WGT_WGSL_SOURCES_H
#define WGT_WGSL_SOURCES_H
typedef struct { const char *name; const char *code; } wgt_wgsl_source;
extern const wgt_wgsl_source wgt_wgsl_sources[];  // terminated by {0, 0}
#endif

// rng.h — the trainer's random numbers: splitmix64, whose whole state is one uint64. That
// makes "the data loader's position" a single number a checkpoint can store, so a resumed run
// draws exactly the windows the uninterrupted run would have drawn.
#ifndef WGT_TRAIN_RNG_H
#define WGT_TRAIN_RNG_H
#include <stdint.h>

static inline uint64_t rng_next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [0, 1) with 53 random bits.
static inline double rng_next_double(uint64_t *s) { return (double)(rng_next_u64(s) >> 11) * 0x1.0p-53; }

// Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject); n > 0.
static inline uint64_t rng_next_below(uint64_t *s, uint64_t n) {
    for (;;) {
        unsigned __int128 p = (unsigned __int128)rng_next_u64(s) * n;
        uint64_t lo = (uint64_t)p;
        if (lo >= n || lo >= (uint64_t)(-n) % n) return (uint64_t)(p >> 64);
    }
}

// A well-mixed starting state derived from a user seed and a stream id, so that the data
// order, the initialisation and sampling draw independent sequences from one --seed.
static inline uint64_t rng_seed_stream(uint64_t seed, uint64_t stream) {
    uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
    return rng_next_u64(&s);
}
#endif

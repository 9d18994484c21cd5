// clock.h — monotonic wall-clock seconds, for progress, ETA and benchmark timing.
#ifndef WGT_CLOCK_H
#define WGT_CLOCK_H
#include <time.h>

static inline double wgt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif

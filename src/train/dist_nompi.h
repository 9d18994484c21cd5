// dist_nompi.h — dist.c without MPI (WGT_NO_MPI; the browser build, docs/web.md): a build of one
// process. launched_by_mpirun() is then always false, so dist_init never starts MPI, the size
// stays 1 and no MPI call below is reached; these stand-ins only let dist.c compile unchanged.
#ifndef WGT_DIST_NOMPI_H
#define WGT_DIST_NOMPI_H
#include <stdlib.h>

typedef int MPI_Comm, MPI_Request, MPI_Datatype, MPI_Op, MPI_Info;
#define MPI_SUCCESS 0
#define MPI_COMM_WORLD 0
#define MPI_COMM_TYPE_SHARED 0
#define MPI_INFO_NULL 0
#define MPI_IN_PLACE ((void *)1)
#define MPI_DOUBLE 0
#define MPI_FLOAT 0
#define MPI_BYTE 0
#define MPI_SUM 0
#define MPI_STATUSES_IGNORE NULL
static inline int wgt_nompi(const char *name, ...) { (void)name; abort(); }
#define MPI_Init(...) wgt_nompi("MPI_Init", __VA_ARGS__)
#define MPI_Finalize() wgt_nompi("MPI_Finalize")
#define MPI_Comm_rank(...) wgt_nompi("MPI_Comm_rank", __VA_ARGS__)
#define MPI_Comm_size(...) wgt_nompi("MPI_Comm_size", __VA_ARGS__)
#define MPI_Comm_split_type(...) wgt_nompi("MPI_Comm_split_type", __VA_ARGS__)
#define MPI_Comm_free(...) wgt_nompi("MPI_Comm_free", __VA_ARGS__)
#define MPI_Allreduce(...) wgt_nompi("MPI_Allreduce", __VA_ARGS__)
#define MPI_Iallreduce(...) wgt_nompi("MPI_Iallreduce", __VA_ARGS__)
#define MPI_Allgather(...) wgt_nompi("MPI_Allgather", __VA_ARGS__)
#define MPI_Bcast(...) wgt_nompi("MPI_Bcast", __VA_ARGS__)
#define MPI_Testall(...) wgt_nompi("MPI_Testall", __VA_ARGS__)
#define MPI_Waitall(...) wgt_nompi("MPI_Waitall", __VA_ARGS__)
#define MPI_Abort(...) wgt_nompi("MPI_Abort", __VA_ARGS__)
#endif

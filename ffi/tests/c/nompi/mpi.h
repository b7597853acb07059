/* The tests' <mpi.h> when built without MPI: the launcher shim. */
#include "../oob_shim.h"

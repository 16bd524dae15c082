//go:build !cgo || (!mpi && !mpich)

package dist

import "fmt"

// MPIBuilt reports whether this binary was built with an MPI backend.
// The backend needs cgo: -tags mpi with CGO_ENABLED=0 builds without it.
const MPIBuilt = false

func openMPI(n int, v string) (Communicator, error) {
	return nil, fmt.Errorf("%w: started by a launcher with %d ranks (%s=%d), but this binary has no MPI backend; "+
		"build it with cgo and `go build -tags mpi` (Open MPI: apt-get install libopenmpi-dev pkg-config) "+
		"or `-tags mpich` (MPICH or Intel MPI: libmpich-dev), or run a single process", ErrNoMPI, n, v, n)
}

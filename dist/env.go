package dist

import (
	"fmt"
	"os"
	"strconv"
)

// launcherVars are the environment variables by which launchers announce
// the number of ranks they started: Open MPI's mpirun, MPICH and Intel
// MPI's Hydra (PMI), and Slurm.
var launcherVars = []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}

// launcherSize returns the world size a launcher announced and the
// variable that said so, or 1 and "" when none did.
func launcherSize() (int, string, error) {
	for _, v := range launcherVars {
		s, ok := os.LookupEnv(v)
		if !ok || s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, v, fmt.Errorf("dist: environment variable %s=%q is not a world size", v, s)
		}
		if n > 1 {
			return n, v, nil
		}
	}
	return 1, "", nil
}

// FromEnvironment returns the Communicator for the way this process was
// started: under an MPI launcher (mpirun, srun, an MPIJob) with more than
// one rank, the MPI world; otherwise Single.
//
// A binary built without MPI (the default build, which needs no cgo) but
// started by a launcher with several ranks returns an error wrapping
// ErrNoMPI that says how to build it, rather than training the same
// shard twice. With MPI, a world whose size disagrees with the launcher's
// is an error too.
func FromEnvironment() (Communicator, error) {
	n, v, err := launcherSize()
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return Single(), nil
	}
	return openMPI(n, v)
}

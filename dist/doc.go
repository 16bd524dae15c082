// Package dist trains one model on several processes (ranks) at once, each
// holding a full replica and a shard of every batch, as PyTorch's
// DistributedDataParallel does.
//
// A Communicator runs the collectives the ranks need (Allreduce, Bcast,
// Allgather, Barrier), with one of three backends behind the same
// interface:
//
//   - Single: rank 0 of a world of 1, the default, so code written for
//     several ranks runs unchanged in one process;
//   - Local: N ranks as goroutines of one process, for tests and for users
//     who want the API on one machine;
//   - MPI: ranks as processes started by mpirun, srun or an MPIJob, over
//     the MPI library found at build time (go build -tags mpi for Open MPI,
//     -tags mpich for MPICH and Intel MPI). The default build has no cgo and
//     no MPI; a binary built without it but started by an MPI launcher
//     fails at once, saying how to build it (see FromEnvironment).
//
// DataParallel keeps the replicas in step: it broadcasts rank 0's
// parameters at the start, and averages gradients across ranks in buckets
// whose allreduce starts during Backward as soon as the bucket's last
// gradient is final, so communication overlaps the rest of the backward
// pass. A bucket is the gradients themselves (Float32Parts), reduced where
// they lie; on one node MPI's large float32 allreduces go through a
// shared MPI window (KILN_MPI_SHM=0 turns it off).
//
// A training loop's other collectives go through Watch, which turns one
// that never finishes (a rank died or hangs) into the end of the job; Any
// lets ranks agree to stop together, and OnRank0 runs a step such as
// writing a checkpoint on rank 0 and hands its outcome to every rank.
package dist

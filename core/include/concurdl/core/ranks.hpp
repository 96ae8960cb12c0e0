// Ranks: experiments whose workers are processes under MPI. This is the launch and the
// bookkeeping (the harness's runner times each sample as the max over the ranks); a chapter's
// communicator (chapter 05) takes the configuration's MPI_Comm from ranks_mpi.hpp.
//
//   concurdl run --ranks 2 calibrate/rank_pingpong
//
// starts `mpirun -np 2 concurdl run ...` (with --allow-run-as-root when run as root,
// --oversubscribe when there are more ranks than CPUs and no hostfile, --bind-to none so that
// threaded code keeps its cores), or runs as it is when already one rank of an mpirun/srun
// launch. Every rank expands the same sweep in the same order; a configuration with
// `ranks = r` runs on world ranks 0..r-1 (the others wait without spinning), its validity is
// agreed by all r, each sample is the max over the ranks of each rank's time, and rank 0 alone
// writes the results, the figures and the report.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace concurdl::ranks {

// Whether this concurdl was built with MPI (CONCURDL_HAVE_MPI).
bool built();
// Whether this process was started by a launcher (OpenMPI's mpirun, PMI/PMIx, Slurm's srun).
bool launched_by_mpi();

// Re-executes this program under mpirun with `ranks` processes (and `hostfile` when given),
// passing `args` (argv[1..]) unchanged, waits, and returns mpirun's exit status. Throws
// UsageError when MPI is not built or mpirun cannot be started.
int launch(int ranks, const std::string& hostfile, const std::vector<std::string>& args);
// The mpirun command line launch() runs (for messages, tests and docs).
std::vector<std::string> launch_command(int ranks, const std::string& hostfile,
                                        const std::vector<std::string>& args);

// MPI_Init once (MPI_THREAD_MULTIPLE requested), MPI_Finalize at exit. After init, world
// rank and size are known; before it (or without MPI) the process is rank 0 of 1.
void init();
bool initialized();
int world_rank();
int world_size();

// The configuration now running: its ranks are world ranks 0..size-1. While it is set,
// participating() says whether this process is one of them and comm_size() how many there are.
class Group {
 public:
  explicit Group(int size);  // size <= world_size(), else UsageError
  ~Group();                  // every world rank waits here for the others (sleeping, not spinning)
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  bool participating() const;
};
int comm_size();  // of the current Group (1 outside one)
int comm_rank();  // in the current Group (0 outside one)

// Where the world's ranks run. A host is what MPI calls a shared-memory node
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)): one machine, or one simulated host of
// scripts/cluster. Hosts are numbered by their lowest world rank.
struct Host {
  std::string name;     // gethostname() (simulated hosts share the machine's)
  std::string address;  // the host's first IPv4 address that is not loopback ("" if none)
  std::vector<int> ranks;
};
struct Placement {
  std::vector<Host> hosts;
  std::vector<int> host_of;  // per world rank
  // How a pair of ranks talks, inside one host and between two: read from Open MPI's pml and btl
  // selection (OMPI_MCA_pml, OMPI_MCA_btl, as mpirun's --mca passes them on), not observed.
  std::string within_host, between_hosts;
};
// Collective over the world (after init(); one host of one rank without MPI).
Placement placement();
// The transports that Open MPI's parameters `pml` and `btl` (empty: its defaults) select inside
// a host and between hosts.
std::pair<std::string, std::string> transports(const std::string& pml, const std::string& btl);

// Collectives over the current Group, for the runner.
bool all_true(bool mine);      // logical AND
double max_over(double mine);  // max
// Every rank's text, in rank order, on rank 0 (empty elsewhere).
std::vector<std::string> gather_text(const std::string& mine);
// A world barrier that sleeps between polls instead of spinning a core.
void polite_barrier();

}  // namespace concurdl::ranks

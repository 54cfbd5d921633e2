// scripts/mpi_allreduce_peer.cpp: Open MPI's own MPI_Allreduce in a plain loop, the peer of
// tbd_bench's AllReduce rows (scripts/dist_compare.py builds and runs it). Per size: a barrier,
// then each call timed alone (as OSU's osu_allreduce), the maximum over ranks per call; the mean
// over the calls (what Google Benchmark reports for tbd's rows) and the median. Prints one JSON
// object per size: {"bytes", "ranks", "time_s", "median_s"}.
// --aligned: the buffer comes from aligned_alloc(64, ...), as tbd's tracking allocator gets its
// memory (core/allocator.cpp), instead of a std::vector: large all-reduces on this machine run
// some 10 % slower on such a buffer, in this loop as in tbd (see results/README.md).
// Usage: mpirun -np P mpi_allreduce_peer [--aligned] BYTES...
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool aligned = argc > 1 && std::string(argv[1]) == "--aligned";
  for (int a = aligned ? 2 : 1; a < argc; ++a) {
    const long long bytes = std::atoll(argv[a]);
    const int n = static_cast<int>(bytes / 4);
    std::vector<float> vec;
    float* data = nullptr;
    if (aligned) {
      data = static_cast<float*>(std::aligned_alloc(64, ((bytes + 63) / 64) * 64));
      for (int i = 0; i < n; ++i) data[i] = static_cast<float>(rank + 1);
    } else {
      vec.assign(static_cast<std::size_t>(n), static_cast<float>(rank + 1));
      data = vec.data();
    }
    // Iterations: about 0.5 s of 2.6 GB/s traffic, at least 5, at most 2000.
    const int iters = static_cast<int>(std::clamp(1.3e9 / std::max(bytes, 1LL), 5.0, 2000.0));
    for (int w = 0; w < 2; ++w)
      MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0, dmax = 0;
      MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times.push_back(dmax);
    }
    double mean = 0;
    for (double t : times) mean += t / static_cast<double>(times.size());
    std::sort(times.begin(), times.end());
    if (rank == 0)
      std::printf("{\"bytes\": %lld, \"ranks\": %d, \"time_s\": %.9g, \"median_s\": %.9g}\n", bytes,
                  size, mean, times[times.size() / 2]);
    if (aligned) std::free(data);
  }
  MPI_Finalize();
  return 0;
}

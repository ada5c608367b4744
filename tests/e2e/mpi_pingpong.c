/* A 2-rank MPI ping-pong that checks every byte both ways. Rank 0 sends a buffer filled with a
 * pattern that depends on the size, the iteration and the direction; rank 1 checks it and sends
 * back the pattern of the other direction; rank 0 checks that. Any mismatch is reported with its
 * offset and the program exits 1 (MPI_Abort), so a transport that corrupts, truncates or
 * reorders data cannot pass.
 *
 *   mpi_pingpong [--iters N] [--max BYTES] [--bench]
 *
 * Sizes are 8 B and every power of four up to --max (default 4 MiB). --bench prints, per size,
 * the half round-trip latency and the bandwidth of the exchange as "size_bytes lat_us MBps"; it
 * checks only the first iteration of each size, so the times are the transport's. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pattern_byte(size_t size, int iter, int direction, size_t i) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(size * 40503u) ^ (uint32_t)(iter * 97) ^
               (uint32_t)(direction ? 0xa5u : 0x3cu);
  return (uint8_t)(x ^ (x >> 11) ^ (x >> 23));
}

static void fill(uint8_t* buf, size_t size, int iter, int direction) {
  for (size_t i = 0; i < size; ++i) buf[i] = pattern_byte(size, iter, direction, i);
}

static void verify(const uint8_t* buf, size_t size, int iter, int direction, int rank) {
  for (size_t i = 0; i < size; ++i) {
    uint8_t want = pattern_byte(size, iter, direction, i);
    if (buf[i] != want) {
      fprintf(stderr, "rank %d: MISMATCH size %zu iteration %d byte %zu: got 0x%02x want 0x%02x\n",
              rank, size, iter, i, buf[i], want);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int iters = 10, bench = 0;
  size_t max_size = 4u << 20;
  for (int a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--iters") == 0 && a + 1 < argc) {
      iters = atoi(argv[++a]);
    } else if (strcmp(argv[a], "--max") == 0 && a + 1 < argc) {
      max_size = strtoull(argv[++a], NULL, 0);
    } else if (strcmp(argv[a], "--bench") == 0) {
      bench = 1;
    } else {
      if (rank == 0) fprintf(stderr, "usage: %s [--iters N] [--max BYTES] [--bench]\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (nranks != 2 || iters < 1 || max_size < 8) {
    if (rank == 0) fprintf(stderr, "needs exactly 2 ranks, --iters >= 1, --max >= 8\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  uint8_t* buf = malloc(max_size);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  const int peer = 1 - rank;
  size_t checked = 0;
  for (size_t size = 8; size <= max_size; size = size < 16 ? 16 : size * 4) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 0; it < iters; ++it) {
      const int check = !bench || it == 0;
      if (rank == 0) {
        if (check) fill(buf, size, it, 0);
        MPI_Send(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
        if (check) memset(buf, 0, size);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (check) verify(buf, size, it, 1, rank);
      } else {
        if (check) memset(buf, 0, size);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (check) verify(buf, size, it, 0, rank);
        if (check) fill(buf, size, it, 1);
        MPI_Send(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
      }
      if (check) checked += size;
    }
    double seconds = MPI_Wtime() - start;
    if (bench && rank == 0) {
      printf("%zu %.2f %.1f\n", size, seconds / iters / 2 * 1e6,
             2.0 * (double)size * iters / seconds / 1e6);
    }
  }
  if (!bench) printf("rank %d: %zu bytes received and verified\n", rank, checked);
  free(buf);
  MPI_Finalize();
  return 0;
}

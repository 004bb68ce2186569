"""How many durable writes a second the disk takes with 1, 2 and 4 in flight.

    python3 durable_writes.py DIRECTORY [SECONDS]

Each thread writes 4 KiB blocks with O_DIRECT | O_DSYNC over blocks of a
file written and synced before (as the commit log writes), in its own
8 MiB of the file, for SECONDS (2) per count of threads, two rounds.
Prints the writes a second for each. The file is removed at the end.
"""

import mmap
import os
import sys
import threading
import time

BLOCK = 4096
REGION = 8 << 20


def main():
    directory = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    path = os.path.join(directory, "durable_writes.dat")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        for offset in range(0, 4 * REGION, 1 << 20):
            os.pwrite(fd, b"\0" * (1 << 20), offset)
        os.fsync(fd)
        # O_DIRECT needs a buffer aligned to the block: an anonymous map is.
        block = mmap.mmap(-1, BLOCK)
        block.write(b"x" * BLOCK)
        for _ in range(2):
            for threads in (1, 2, 4):
                print(f"{threads} in flight: {run(path, block, threads, seconds):.0f} writes/s")
    finally:
        os.close(fd)
        os.remove(path)


def run(path, block, threads, seconds):
    counts = [0] * threads
    stop = threading.Event()

    def write(n):
        fd = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
        start, written = n * REGION, 0
        while not stop.is_set():
            os.pwrite(fd, block, start + (written % (REGION // BLOCK)) * BLOCK)
            written += 1
        os.close(fd)
        counts[n] = written

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return sum(counts) / seconds


if __name__ == "__main__":
    main()

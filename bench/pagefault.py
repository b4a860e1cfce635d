"""What a page of new memory costs on this machine: a probe of the machine the
benchmarks run on. Maps anonymous memory, writes one byte per 4 KiB page (each write
is a page fault: the kernel finds, zeroes and maps a page), writes each page again (no
fault: the loop's own cost), unmaps, and does it again. The first round may take pages
the virtual machine's host has never backed, later rounds take pages freed a moment
before. Appends the rounds to bench/results/pagefault.jsonl.

    python bench/pagefault.py [--mib 256] [--rounds 3] [--no-record]

On a physical machine a fault costs well under a microsecond; where it costs several,
any work that grows its memory, or writes many new small files (each takes a page of
tmpfs or of the page cache), runs at the speed of the faults, not of its own code.
"""

from __future__ import annotations

import argparse
import mmap
import time

PAGE = 4096


def touch(region: mmap.mmap, size: int, value: int) -> float:
    start = time.perf_counter()
    for offset in range(0, size, PAGE):
        region[offset] = value
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    size = args.mib << 20
    pages = size // PAGE
    print("| round | first write, µs per page (a fault) | second write, µs per page "
          "(no fault) | cost of the fault alone, µs |")
    print("|---|---|---|---|")
    rounds = []
    for n in range(1, args.rounds + 1):
        region = mmap.mmap(-1, size)
        try:
            first = touch(region, size, 1) / pages * 1e6
            second = touch(region, size, 2) / pages * 1e6
        finally:
            region.close()
        print(f"| {n} | {first:.2f} | {second:.2f} | {first - second:.2f} |")
        rounds.append({"round": n, "first_write_us_per_page": first,
                       "second_write_us_per_page": second, "fault_us": first - second})
    if not args.no_record:
        import record
        record.run("pagefault", {"mib": args.mib, "rounds": rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

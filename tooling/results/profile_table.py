"""Turns `ncu --page raw --csv` output into sorted metric / value / unit tables, one per kernel:
plain text that diffs well between captures."""
import argparse
import csv
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv", help="output of ncu --import REP --page raw --csv")
    ap.add_argument("--exclude", action="append", default=[], help="skip kernels whose name contains this")
    ap.add_argument("--header", action="append", default=[], help="a line to put at the top")
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    # Skip anything ncu printed before the table (its header row starts with "ID").
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        print(f"error: {args.csv} holds no ncu raw table", file=sys.stderr)
        return 1
    names, units, kernels = rows[start], rows[start + 1], rows[start + 2:]
    col = {n: i for i, n in enumerate(names)}
    for line in args.header:
        print(f"# {line}")
    for k in kernels:
        kname = k[col["Kernel Name"]] if "Kernel Name" in col else "?"
        if any(e in kname for e in args.exclude):
            continue
        print(f"\n## kernel {kname} (id {k[col['ID']]})")
        for i in sorted(range(len(names)), key=lambda i: names[i]):
            if names[i] in ("ID", "Kernel Name") or i >= len(k) or k[i] == "":
                continue
            print(f"{names[i]} | {k[i]} | {units[i] if i < len(units) else ''}".rstrip(" |"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Load rate of MJCF corpora: ``python tools/corpus_mjcf.py [DIR_OR_FILE ...]``.

Without arguments, every dm_control suite domain XML (dm_control/suite/*.xml,
the pip package ``dm_control``) is loaded with ``jaxode.load_mjcf``; prints
one line per file (ok / the error) and the rate. Warnings are counted, not
shown (``-v`` shows the first of each file).
"""
from __future__ import annotations

import glob
import os
import sys
import warnings


def corpus(args) -> list[str]:
    if not args:
        import dm_control.suite as suite
        return sorted(glob.glob(os.path.join(os.path.dirname(suite.__file__), "*.xml")))
    files = []
    for a in args:
        files += sorted(glob.glob(os.path.join(a, "**", "*.xml"), recursive=True)) \
            if os.path.isdir(a) else [a]
    return files


def main(argv) -> int:
    import jaxode
    verbose = "-v" in argv
    files = corpus([a for a in argv if a != "-v"])
    ok = 0
    for f in files:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                b = jaxode.load_mjcf(f)
                ok += 1
                print(f"ok    {os.path.basename(f)}: {len(b.bodies)} bodies, {len(b.geoms)} geoms, "
                      f"{len(b.joints)} joints, {len(w)} warnings")
            except Exception as e:  # noqa: BLE001  (the report lists every failure)
                print(f"FAIL  {os.path.basename(f)}: {type(e).__name__}: {e}")
        if verbose:
            for x in w:
                print("      ", x.message)
    print(f"loaded {ok}/{len(files)} = {100.0 * ok / max(1, len(files)):.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

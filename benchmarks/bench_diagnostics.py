"""Cost of the convergence diagnostics against the number of variables: the
package's R-hat and bulk and tail ESS (vectorised over variables, blocks on
every core) against ArviZ's (one variable at a time), on 4 chains of 1000
draws of random walks, in the same process; the two agree to 1e-9 (checked
where both run).

Run: python benchmarks/bench_diagnostics.py [--quick]   (the last line is JSON)
"""
import argparse
import json
import time
import warnings

import numpy as np

from adaptive_hmc.diagnostics import arviz, chain_statistics

CHAINS, DRAWS = 4, 1000
VARIABLES = (10, 100, 1000, 10000)
ARVIZ_UP_TO = 1000        # ArviZ takes about 10 ms a variable: beyond this it is left out


def _arviz(y) -> dict:
    az = arviz()
    ds = az.convert_to_dataset(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"rhat": az.rhat(ds, method="rank")["x"].values, "ess_bulk": az.ess(ds, method="bulk")["x"].values,
                "ess_tail": az.ess(ds, method="tail")["x"].values}


def measure(v: int, with_arviz: bool) -> dict:
    y = 0.1 * np.random.default_rng(v).normal(size=(CHAINS, DRAWS, v)).cumsum(axis=1)
    t = time.perf_counter()
    ours = chain_statistics(y)
    out = {"variables": v, "seconds": round(time.perf_counter() - t, 4)}
    if with_arviz:
        t = time.perf_counter()
        ref = _arviz(y)
        out["arviz_seconds"] = round(time.perf_counter() - t, 3)
        out["agree"] = all(np.allclose(ours[k], ref[k], rtol=1e-9, atol=1e-9) for k in ref)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="up to 100 variables")
    args = ap.parse_args()
    rows = [measure(v, v <= ARVIZ_UP_TO) for v in VARIABLES if not (args.quick and v > 100)]
    print(f"{CHAINS} chains x {DRAWS} draws")
    print(f"{'variables':>9} {'seconds':>8} {'ArviZ s':>8} {'speed-up':>9} {'agree':>6}")
    for r in rows:
        a = r.get("arviz_seconds")
        print(f"{r['variables']:>9} {r['seconds']:>8.3f} {a if a is not None else '-':>8} "
              f"{(a / r['seconds'] if a else float('nan')):>9.1f} {str(r.get('agree', '-')):>6}")
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()

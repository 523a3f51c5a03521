"""The slider tick's floors, in the servers: `.venv/bin/python bench/tick_floors.py [VARIANT ...]`.

The same servers and alternation as `bench_web.py --ratio-only` (uvicorn subprocesses, 1,000 new slider
positions a variant, ours and the bare app request by request, CPU per request of each process), with
our real app's tick route (`routes._plan_page`) replaced before the server starts by:

- `full`: the real tick (for reference);
- `plan`: the plan computed as the route computes it (the page's declaration, `views.plan_view` with
  the app's caches), then a fragment rendered at start returned with the tick's headers: nothing presented;
- `present`: the plan, `present.plan_context` and its pool SVG, then the ready fragment: nothing rendered;
- `stub`: no plan, the ready fragment with the tick's headers: the stack around a stub route;
- `stub-nomw`: the stub without our middleware (the app's `user_middleware` emptied);
- `stub-nohop`: the stub run on the event loop (`cpu.run` calling the route directly: no worker thread).

Against the bare app of bench_web (it renders the fragment's blocks from ready contexts), or with
`--bare-stub`, a bare app answering one ready fragment (what a stub costs on a stack with nothing on it).
Prints a table; writes nothing. What it tells: how much of the 1.3x budget a tick has spent before it
presents or renders anything.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_web as bw  # beside this file

VARIANTS = ("full", "plan", "present", "stub", "stub-nomw", "stub-nohop")

# Our server with its tick route replaced (argv: variant, port).
OURS = textwrap.dedent(
    """
    import sys
    import warnings

    warnings.simplefilter("ignore")
    from fastapi.responses import HTMLResponse

    import app.web.app as web_app
    from app.settings import Settings
    from app.web import cpu, htmx
    from app.web.plan import present, routes, views

    variant, port = sys.argv[1], int(sys.argv[2])
    made = web_app.create_app(Settings(database_url="sqlite://"))
    params = {"model": "llama-3.1-8b", "tp": "8", "util": "0.55"}
    context = {**present.plan_context(views.plan_view(params, made.state.bases, False), form=False),
               "token_required": False, "fragment": True}
    BODY = made.state.templates.render_blocks(routes.PLAN, context, list(routes.PLAN_FRAGMENT))

    def reply(url):
        response = HTMLResponse(BODY)
        htmx.replace_url(response, url)
        response.headers["Vary"] = "HX-Request, KV-Explain-Open"
        return response

    def view(request):
        params, _ = routes._declare_plan(request, routes.PLAN_FRAGMENT, routes._query_items(request))
        return views.plan_view(params, routes._bases(request), False, routes._cache(request), cleaned=True)

    def plan(request):
        return reply(view(request).url)

    def presented(request):
        found = view(request)
        context = routes._plan_context(request, found, form=False)
        if "pool" in context["charts"]:
            context["charts"]["pool"].svg
        return reply(found.url)

    def stub(request):
        return reply("/plan?model=llama-3.1-8b&tp=8&util=0.55")

    routes._plan_page = {"full": routes._plan_page, "plan": plan, "present": presented}.get(variant, stub)
    if variant == "stub-nohop":
        async def direct(request, func, *args, **kwargs):
            return func(*args, **kwargs)
        cpu.run = direct
    if variant == "stub-nomw":
        create = web_app.create_app
        def without_middleware(settings=None):
            app = create(settings)
            app.user_middleware = []
            return app
        web_app.create_app = without_middleware
    web_app.serve("127.0.0.1", port)
    """
)

# A bare app answering one ready fragment (argv: port).
BARE_STUB = textwrap.dedent(
    """
    import gc
    import sys
    import warnings

    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    warnings.simplefilter("ignore")
    from app.settings import Settings
    from app.web.app import create_app
    from app.web.plan import present, routes, views

    port = int(sys.argv[1])
    ours = create_app(Settings(database_url="sqlite://"))
    params = {"model": "llama-3.1-8b", "tp": "8", "util": "0.55"}
    context = {**present.plan_context(views.plan_view(params, ours.state.bases, False), form=False),
               "token_required": False, "fragment": True}
    body = ours.state.templates.render_blocks(routes.PLAN, context, list(routes.PLAN_FRAGMENT))
    gc.collect()
    gc.freeze()
    app = FastAPI()

    @app.get("/fragment")
    def fragment(i: int = 0) -> HTMLResponse:
        return HTMLResponse(body)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    """
)


def one(variant: str, offset: int, bare_stub: bool) -> dict[str, float]:
    our_port, bare_port = bw.free_port(), bw.free_port()
    ours = bw.start([sys.executable, "-c", OURS, variant, str(our_port)], f"http://127.0.0.1:{our_port}/")
    bare: subprocess.Popen[bytes] | None = None
    try:
        args = [BARE_STUB, str(bare_port)] if bare_stub else [bw.BARE_APP, str(bare_port),
                                                               *bw.slider_paths(bw.BARE_CONTEXTS)]
        bare = bw.start([sys.executable, "-c", *args], f"http://127.0.0.1:{bare_port}/fragment")
        servers = (our_port, ours.pid), (bare_port, bare.pid)
        return asyncio.run(bw.slider_ratio(servers, 0, 10, 100, offset=offset))
    finally:
        for proc in (ours, bare):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("variants", nargs="*", default=["full", "plan", "present", "stub"],
                        help=f"any of {', '.join(VARIANTS)} (default: full plan present stub)")
    parser.add_argument("--bare-stub", action="store_true", help="against a bare app answering a ready fragment")
    args = parser.parse_args()
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    print(f"load {bw.load_average()}; bare: {'a ready fragment' if args.bare_stub else 'its render'}")
    print("| variant | 1-min load after | CPU ours / bare per request | CPU ratio | wall p50 ours / bare |")
    print("| --- | --- | --- | --- | --- |")
    for k, variant in enumerate(args.variants):
        r = one(variant, bw.RATIO_OFFSET + (k % 4) * 1100, args.bare_stub)
        print(f"| {variant} | {r['load']:.2f} | {r['ours_cpu_ms']:.2f} / {r['bare_cpu_ms']:.2f} ms | "
              f"{r['cpu_ratio']:.2f}x | {r['ours_p50']:.2f} / {r['bare_p50']:.2f} ms |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS: a TCP proxy on 127.0.0.1
that adds DELAY_MS one way to every byte in each direction, a long link
without netem (the CI and bench machines have no sch_netem); its own
throughput is a Python loop's (it carried 133 MB/s on the project VM)."""
import asyncio, sys, time

LP, TP, D = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000.0

async def pipe(r, w):
    q = asyncio.Queue()
    async def rd():
        while True:
            b = await r.read(65536)
            await q.put((time.monotonic() + D, b))
            if not b:
                return
    async def wr():
        while True:
            due, b = await q.get()
            dt = due - time.monotonic()
            if dt > 0:
                await asyncio.sleep(dt)
            if not b:
                try:
                    w.write_eof()
                except Exception:
                    pass
                return
            w.write(b)
            await w.drain()
    await asyncio.gather(rd(), wr(), return_exceptions=True)
    w.close()

async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection("127.0.0.1", TP)
    except Exception:
        cw.close(); return
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw), return_exceptions=True)

async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", LP)
    async with srv:
        await srv.serve_forever()

asyncio.run(main())

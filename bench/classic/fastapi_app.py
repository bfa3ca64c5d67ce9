"""The classic crawl experiment's server: FastAPI on uvicorn, the same /add endpoint as
`concur serve` (waits `delay` ms, answers 10 bytes).

  /usr/bin/python3 -m uvicorn fastapi_app:app --port PORT --log-level warning
"""

import asyncio

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

app = FastAPI()


@app.get("/add", response_class=PlainTextResponse)
async def add(name: str = "", delay: float = 0):
    if delay > 0:
        await asyncio.sleep(delay / 1000)
    return "ok: added\n"

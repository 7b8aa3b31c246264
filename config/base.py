"""What every settings section shares: frozen models that refuse unknown keys, and URL shapes."""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, ConfigDict

# An absolute http(s) URL with a host, no userinfo, query or fragment (front.public_url).
PUBLIC_URL: Final = re.compile(r"https?://[^/?#@\s]+(/[^?#\s]*)?", re.IGNORECASE)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

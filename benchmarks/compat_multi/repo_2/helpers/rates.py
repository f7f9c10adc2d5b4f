import json
from pathlib import Path

RATES = json.loads((Path(__file__).parent / "rates.json").read_text())

"""Helpers the Python models import from the project root."""


def tier_of(score: float) -> str:
    if score >= 30:
        return "gold"
    if score >= 15:
        return "silver"
    return "bronze"

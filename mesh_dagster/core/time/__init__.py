"""Time: dates and durations (`dates`), cron schedules and interval units (`cron`), intervals and
their arithmetic (`intervals`), and a model's time column (`time_column`).

The bottom layer of core/: it imports nothing of core but `core.errors`.
"""

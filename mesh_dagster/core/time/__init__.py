"""Time: dates and durations (`dates`), cron schedules and interval units (`cron`), intervals and
their arithmetic (`intervals`), a model's time column (`time_column`), and where a model
without `start` starts (`starts`).

The bottom layer of core/: it imports nothing of core but `core.errors`.
"""

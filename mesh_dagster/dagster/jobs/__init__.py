"""Jobs, sensors and schedules that are not a model's step: plan / apply / approve jobs
(reviews.py), promote and restate jobs, the git sensor, the cron schedules. May import assets.py,
restamp/, mapping/ and compat.py."""

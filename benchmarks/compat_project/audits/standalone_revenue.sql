AUDIT (
  name revenue_matches_order_lines,
  standalone true
);

SELECT
  *
FROM (
  SELECT
    SUM(revenue) AS r
  FROM shop.daily_revenue
) AS d
CROSS JOIN (
  SELECT
    SUM(amount) AS a
  FROM shop.order_lines
) AS l
WHERE
  ABS(d.r - l.a) > 0.01

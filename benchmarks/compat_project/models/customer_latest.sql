MODEL (
  name shop.customer_latest,
  kind INCREMENTAL_BY_UNIQUE_KEY (
    unique_key customer_id,
    batch_size 3
  ),
  start '2024-01-01'
);

SELECT
  customer_id,
  COUNT(*) AS order_count,
  MAX(order_date) AS last_order_date
FROM shop.order_lines
WHERE
  order_date BETWEEN @start_date AND @end_date
GROUP BY
  customer_id

MODEL (
  name shop.order_log,
  kind INCREMENTAL_UNMANAGED
);

SELECT
  order_id,
  status,
  order_date
FROM shop.order_lines

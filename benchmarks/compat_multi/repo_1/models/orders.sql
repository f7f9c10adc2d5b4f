MODEL (
  name bronze.orders,
  kind SEED (
    path '$root/seeds/orders.csv'
  ),
  columns (
    order_id INT,
    order_date DATE,
    amount DOUBLE
  )
);

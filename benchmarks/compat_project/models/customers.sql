-- Customers: a seed without `columns` (types come from the CSV).
MODEL (
  name shop.customers,
  kind SEED (
    path '../seeds/customers.csv'
  ),
  grain customer_id,
  audits (
    unique_values(columns := (customer_id)),
    not_null(columns := (customer_id, name))
  )
);

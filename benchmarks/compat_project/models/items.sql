MODEL (
  name shop.items,
  kind SEED (
    path '$root/seeds/items.csv',
    batch_size 2
  ),
  columns (
    item_id INT,
    item_name TEXT,
    price DOUBLE
  ),
  grain item_id
);

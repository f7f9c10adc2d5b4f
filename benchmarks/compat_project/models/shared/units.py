"""A helper module inside models/ (no model of its own), imported by models by its project path."""

UNIT_COLUMNS = ["order_date", "item_id", "units"]


def per_day_and_item(df):
    out = df.groupby(["order_date", "item_id"], as_index=False)["quantity"].sum()
    return out.rename(columns={"quantity": "units"})

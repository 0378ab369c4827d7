-- The colour of an app on the hosted sign-in page (its buttons), as #rrggbb; null: the default.
alter table apps
  add column brand_color text,
  add constraint apps_brand_color check (brand_color ~ '^#[0-9a-f]{6}$');

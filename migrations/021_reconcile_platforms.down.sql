DROP TABLE IF EXISTS reconcile_platforms;

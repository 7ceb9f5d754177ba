-- Every kind of key cell: strings that need escaping, NULL, integers,
-- decimals, booleans and sub-second timestamps.
CREATE SOURCE cell_events (
  name  VARCHAR,
  n     BIGINT,
  price DECIMAL(12,3),
  flag  BOOLEAN,
  ts    TIMESTAMP,
  x     DOUBLE
) WITH (format = 'jsonl');

SELECT name, n, price, flag, ts, count(*) AS c, sum(x) AS sx, max(x) AS mx
FROM cell_events
GROUP BY name, n, price, flag, ts;

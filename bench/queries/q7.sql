-- Nexmark q7 (highest bid), windowed part: the highest price in each
-- 10-second TUMBLE, one group per window. Input: bench/gen --kind bids.
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
                    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW q7 AS
SELECT TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, max(price) AS max_price
FROM bids
GROUP BY TUMBLE(date_time, INTERVAL '10' SECOND)
EMIT EARLY EVERY INTERVAL '1' SECOND;

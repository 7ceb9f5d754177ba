-- Nexmark q12 (bids per bidder in a fixed window), on event time: a
-- 10-second TUMBLE count per bidder. Input: bench/gen --kind bids.
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
                    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW q12 AS
SELECT bidder, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS bid_count
FROM bids
GROUP BY bidder, TUMBLE(date_time, INTERVAL '10' SECOND)
EMIT EARLY EVERY INTERVAL '1' SECOND;

-- Nexmark q5 (hot items), windowed part: bids per auction in a 10-second
-- HOP sliding every 2 seconds (HOP(ts, slide, size), Flink's order); each
-- bid counts in 5 windows. Input: bench/gen --kind bids.
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
                    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW q5 AS
SELECT auction, HOP_START(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS window_start,
       count(*) AS num
FROM bids
GROUP BY auction, HOP(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
EMIT EARLY EVERY INTERVAL '1' SECOND;

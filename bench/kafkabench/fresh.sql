-- The freshness query (bench/kafkabench --mode fresh): per group, a 5-second
-- event-time TUMBLE publishing the newest event's send time (sent_ms, the
-- producer's wall clock in ms), emitted early every 100 ms. A reader takes
-- its arrival time minus max_sent_ms. The watermark trails by 1 second, so
-- a window's final follows its newest event by about that much.
CREATE SOURCE ticks (grp VARCHAR, sent_ms BIGINT, event_time TIMESTAMP,
                     WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW fresh AS
SELECT grp, TUMBLE_START(event_time, INTERVAL '5' SECOND) AS window_start,
       count(*) AS events, max(sent_ms) AS max_sent_ms
FROM ticks
GROUP BY grp, TUMBLE(event_time, INTERVAL '5' SECOND)
EMIT EARLY EVERY INTERVAL '100' MILLISECOND;

"""`obc verify`: whether the library a job.sh embeds is exactly the one its obc release
shipped."""

-- The engine flags each launch ran with (its cmd.sh), for its layout.
select run_id, flag, flag_value
from stg_command_flags
where flag like '-%'
order by run_id, flag_position

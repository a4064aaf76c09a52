from skyward.agent.supervisor import main

main()
